//! zkCli's `setquota`, `listquota` and `delquota`, which are client-side in ZooKeeper too: they
//! write the `zookeeper_limits` and `zookeeper_stats` nodes under `/zookeeper/quota/<path>`,
//! which the server then keeps (ecosystem.md section 7).

use std::collections::BTreeMap;

use zookeeper_client as zk;

use super::command::QuotaField;
use super::output;
use super::znode::{Reply, check_path};

const QUOTA_ROOT: &str = "/zookeeper/quota";
const LIMITS: &str = "zookeeper_limits";
const STATS: &str = "zookeeper_stats";

/// ZooKeeper's `StatsTrack`: `count` and `bytes` first, then, if there are other keys, `=` and
/// `;key=value` for each of them in key order. Unset is -1.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct StatsTrack(BTreeMap<String, i64>);

impl StatsTrack {
    fn parse(text: &str) -> StatsTrack {
        let mut track = StatsTrack::default();
        for pair in text.split([',', ';']).filter(|p| !p.is_empty()) {
            let mut parts = pair.split('=');
            let key = parts.next().unwrap_or_default();
            let value = parts
                .next()
                .filter(|v| !v.is_empty())
                .and_then(|v| v.parse().ok());
            track.0.insert(key.to_owned(), value.unwrap_or(-1));
        }
        track
    }

    fn limits() -> StatsTrack {
        let mut track = StatsTrack::default();
        for field in [
            QuotaField::Count,
            QuotaField::Bytes,
            QuotaField::CountHard,
            QuotaField::BytesHard,
        ] {
            track.set(field, -1);
        }
        track
    }

    fn get(&self, key: &str) -> i64 {
        self.0.get(key).copied().unwrap_or(-1)
    }

    fn set(&mut self, field: QuotaField, value: i64) {
        self.0.insert(key(field).to_owned(), value);
    }
}

impl std::fmt::Display for StatsTrack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "count={},bytes={}", self.get("count"), self.get("bytes"))?;
        let others: Vec<_> = self
            .0
            .iter()
            .filter(|(k, _)| *k != "count" && *k != "bytes")
            .collect();
        if !others.is_empty() {
            f.write_str("=")?;
            for (key, value) in others {
                write!(f, ";{key}={value}")?;
            }
        }
        Ok(())
    }
}

fn key(field: QuotaField) -> &'static str {
    match field {
        QuotaField::Count => "count",
        QuotaField::Bytes => "bytes",
        QuotaField::CountHard => "countHardLimit",
        QuotaField::BytesHard => "byteHardLimit",
    }
}

fn quota_dir(path: &str) -> String {
    format!("{QUOTA_ROOT}{path}")
}

fn fail(path: &str) -> impl Fn(zk::Error) -> String + '_ {
    move |error| output::error(&error, path)
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

async fn create_if_missing(client: &zk::Client, path: &str, data: &[u8]) -> Result<bool, String> {
    match client.create(path, data, &persistent()).await {
        Ok(_) => Ok(true),
        Err(zk::Error::NodeExists) => Ok(false),
        Err(error) => Err(output::error(&error, path)),
    }
}

async fn read(client: &zk::Client, path: &str) -> Result<Option<StatsTrack>, String> {
    match client.get_data(path).await {
        Ok((data, _)) => Ok(Some(StatsTrack::parse(&String::from_utf8_lossy(&data)))),
        Err(zk::Error::NoNode) => Ok(None),
        Err(error) => Err(output::error(&error, path)),
    }
}

/// zkCli's `setquota`: a new quota gets limits with the one field set and stats `count=0,bytes=0`
/// (the server fills in the usage); an existing one gets the field changed.
pub async fn set_quota(client: &zk::Client, path: &str, field: QuotaField, value: i64) -> Reply {
    check_path(path)?;
    if path == "/" || path.starts_with(QUOTA_ROOT) {
        return Err(format!("cannot set a quota under the path: {QUOTA_ROOT}"));
    }
    if client.check_stat(path).await.map_err(fail(path))?.is_none() {
        return Err(format!("{path} does not exist."));
    }
    check_no_other_quota(client, path).await?;
    let dir = quota_dir(path);
    let mut at = String::new();
    for part in dir.split('/').skip(1) {
        at = format!("{at}/{part}");
        create_if_missing(client, &at, b"").await?;
    }
    let (limits_path, stats_path) = (format!("{dir}/{LIMITS}"), format!("{dir}/{STATS}"));
    let mut out = String::new();
    match read(client, &limits_path).await? {
        None => {
            let mut limits = StatsTrack::limits();
            limits.set(field, value);
            create_if_missing(client, &limits_path, limits.to_string().as_bytes()).await?;
            create_if_missing(client, &stats_path, b"count=0,bytes=0").await?;
        }
        Some(mut limits) => {
            limits.set(field, value);
            if let Some(usage) = read(client, &stats_path).await? {
                out = warnings(&limits, &usage);
            }
            client
                .set_data(&limits_path, limits.to_string().as_bytes(), None)
                .await
                .map_err(fail(&limits_path))?;
        }
    }
    Ok(out)
}

/// zkCli's warnings when a limit is already below the usage.
fn warnings(limits: &StatsTrack, usage: &StatsTrack) -> String {
    let mut out = String::new();
    for (soft, hard, name) in [
        ("count", "countHardLimit", "count"),
        ("bytes", "byteHardLimit", "bytes"),
    ] {
        let used = usage.get(name);
        let below = [limits.get(soft), limits.get(hard)]
            .into_iter()
            .any(|l| l > -1 && l < used);
        if below {
            out += &format!(
                "[Warning]: the {name} quota you create is less than the existing {name}:{used}\n"
            );
        }
    }
    out
}

/// Only one quota on any root-to-leaf path: none on an ancestor, none on a descendant.
async fn check_no_other_quota(client: &zk::Client, path: &str) -> Result<(), String> {
    let mut ancestor = String::new();
    for part in path.split('/').skip(1) {
        ancestor = format!("{ancestor}/{part}");
        if ancestor != path
            && read(client, &format!("{}/{LIMITS}", quota_dir(&ancestor)))
                .await?
                .is_some()
        {
            return Err(format!("{path} has a parent {ancestor} which has a quota"));
        }
    }
    let dir = quota_dir(path);
    let mut stack = vec![dir.clone()];
    while let Some(at) = stack.pop() {
        let children = match client.list_children(&at).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => continue,
            Err(error) => return Err(output::error(&error, &at)),
        };
        for child in children {
            if child == LIMITS && at != dir {
                let below = &at[QUOTA_ROOT.len()..];
                return Err(format!("{path} has a child {below} which has a quota"));
            }
            if child != LIMITS && child != STATS {
                stack.push(format!("{at}/{child}"));
            }
        }
    }
    Ok(())
}

/// zkCli's `listquota`: where the limits are (zkCli prints that line on stderr), the limits
/// and the usage.
pub async fn list_quota(client: &zk::Client, path: &str) -> Reply {
    check_path(path)?;
    let dir = quota_dir(path);
    let limits_path = format!("{dir}/{LIMITS}");
    eprintln!("absolute path is {limits_path}");
    let missing = || format!("quota for {path} does not exist.");
    let limits = read(client, &limits_path).await?.ok_or_else(missing)?;
    let usage = read(client, &format!("{dir}/{STATS}"))
        .await?
        .ok_or_else(missing)?;
    Ok(format!(
        "Output quota for {path} {limits}\nOutput stat for {path} {usage}\n"
    ))
}

/// zkCli's `delquota`: with a flag, that limit back to -1; without, the quota's nodes and the
/// mirror path's nodes left empty.
pub async fn del_quota(client: &zk::Client, path: &str, field: Option<QuotaField>) -> Reply {
    check_path(path)?;
    let dir = quota_dir(path);
    let limits_path = format!("{dir}/{LIMITS}");
    let Some(mut limits) = read(client, &limits_path).await? else {
        return Ok(format!("Quota does not exist for {path}\n"));
    };
    if let Some(field) = field {
        limits.set(field, -1);
        client
            .set_data(&limits_path, limits.to_string().as_bytes(), None)
            .await
            .map_err(fail(&limits_path))?;
        return Ok(String::new());
    }
    for node in [LIMITS, STATS] {
        let node = format!("{dir}/{node}");
        match client.delete(&node, None).await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(error) => return Err(output::error(&error, &node)),
        }
    }
    let mut at = dir;
    while at != QUOTA_ROOT {
        match client.delete(&at, None).await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(zk::Error::NotEmpty) => break,
            Err(error) => return Err(output::error(&error, &at)),
        }
        at.truncate(at.rfind('/').unwrap_or(0));
    }
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_track_prints_as_zookeeper_does() {
        let mut limits = StatsTrack::limits();
        limits.set(QuotaField::Count, 3);
        assert_eq!(
            limits.to_string(),
            "count=3,bytes=-1=;byteHardLimit=-1;countHardLimit=-1"
        );
        let parsed = StatsTrack::parse("count=3,bytes=-1=;byteHardLimit=10;countHardLimit=-1");
        assert_eq!(parsed.get("byteHardLimit"), 10);
        assert_eq!(
            parsed.to_string(),
            "count=3,bytes=-1=;byteHardLimit=10;countHardLimit=-1"
        );
        assert_eq!(
            StatsTrack::parse("count=4,bytes=4").to_string(),
            "count=4,bytes=4"
        );
    }

    #[test]
    fn warns_when_a_limit_is_below_the_usage() {
        let limits = StatsTrack::parse("count=3,bytes=-1=;byteHardLimit=-1;countHardLimit=5");
        let usage = StatsTrack::parse("count=4,bytes=4");
        assert_eq!(
            warnings(&limits, &usage),
            "[Warning]: the count quota you create is less than the existing count:4\n"
        );
    }
}
