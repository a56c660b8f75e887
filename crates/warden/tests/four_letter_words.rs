//! Four-letter words in ZooKeeper 3.9.5's text formats (captured from a running ZooKeeper;
//! monitoring tools and client libraries parse them), the whitelist, and the command line.

mod support;

use std::process::Command;

use support::warden::{Warden, client, ephemeral, persistent};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_word_answers_in_zookeepers_format() {
    let warden = Warden::start("");
    let zk = client(&warden).await;
    zk.create("/a", b"x", &persistent()).await.unwrap();
    zk.create("/e", b"", &ephemeral()).await.unwrap();
    let (_, _, _watch) = zk.get_and_watch_data("/a").await.unwrap();

    assert_eq!(warden.four_letter("ruok"), "imok");
    assert_eq!(warden.four_letter("isro"), "rw");

    let srvr = warden.four_letter("srvr");
    let lines: Vec<&str> = srvr.lines().collect();
    assert!(lines[0].starts_with("Zookeeper version: 3.9.5-"), "{srvr}");
    let keys: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "Latency min/avg/max",
            "Received",
            "Sent",
            "Connections",
            "Outstanding",
            "Zxid",
            "Mode",
            "Node count"
        ],
        "{srvr}"
    );
    assert!(srvr.contains("Mode: standalone\n"), "{srvr}");
    assert!(srvr.contains("Node count: 10\n"), "{srvr}");

    let stat = warden.four_letter("stat");
    assert!(stat.contains("\nClients:\n /127.0.0.1:"), "{stat}");

    let cons = warden.four_letter("cons");
    assert!(
        cons.lines()
            .any(|l| l.contains(&format!("sid={:#x},", zk.session_id().0))),
        "{cons}"
    );

    let envi = warden.four_letter("envi");
    assert!(
        envi.starts_with("Environment:\nzookeeper.version=3.9.5-"),
        "{envi}"
    );

    let mntr = warden.four_letter("mntr");
    for line in mntr.lines() {
        assert_eq!(
            line.split('\t').count(),
            2,
            "mntr lines are key<TAB>value: {line:?}"
        );
    }
    for key in [
        "zk_version\t3.9.5-",
        "zk_server_state\tstandalone",
        "zk_znode_count\t10",
        "zk_ephemerals_count\t1",
        "zk_watch_count\t1",
        // The metrics provider's families, as ZooKeeper's default provider dumps them.
        "\nzk_avg_readlatency\t",
        "\nzk_p999_updatelatency\t",
        "\nzk_cnt_snapshottime\t",
        "\nzk_commit_count\t",
    ] {
        assert!(mntr.contains(key), "mntr lacks {key:?}:\n{mntr}");
    }

    let sid = format!("{:#x}", zk.session_id().0);
    assert_eq!(
        warden.four_letter("wchs"),
        "1 connections watching 1 paths\nTotal watches:1\n"
    );
    assert_eq!(warden.four_letter("wchc"), format!("{sid}\n\t/a\n\n"));
    assert_eq!(warden.four_letter("wchp"), format!("/a\n\t{sid}\n\n"));

    let dirs = warden.four_letter("dirs");
    assert!(
        dirs.starts_with("datadir_size: ") && dirs.contains("\nlogdir_size: "),
        "{dirs}"
    );
    let dump = warden.four_letter("dump");
    assert!(dump.contains(&format!("{sid}:\n\t/e\n")), "{dump}");
    let conf = warden.four_letter("conf");
    assert!(
        conf.contains(&format!("clientPort={}\n", warden.port)),
        "{conf}"
    );
    assert!(conf.contains("tickTime=1000\n"), "{conf}");
    assert_eq!(warden.four_letter("crst"), "Connection stats reset.\n");
    assert_eq!(warden.four_letter("srst"), "Server stats reset.\n");
}

/// ClickHouse Keeper's and RaftKeeper's words, in their text formats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_keeper_words_answer_in_its_format() {
    let warden = Warden::start("");
    let zk = client(&warden).await;
    for i in 0..20 {
        zk.create(&format!("/n{i}"), b"x", &persistent())
            .await
            .unwrap();
    }

    assert_eq!(warden.four_letter("apiv"), "1", "as /keeper/api_version");
    let ftfl = warden.four_letter("ftfl");
    let flags: Vec<(&str, &str)> = ftfl
        .lines()
        .map(|l| l.split_once('\t').expect("name<TAB>0|1"))
        .collect();
    assert_eq!(flags.len(), 12, "{ftfl}");
    assert!(flags.contains(&("filtered_list", "1")), "{ftfl}");
    assert!(flags.contains(&("multi_read", "0")), "{ftfl}");

    let lgif = |warden: &Warden| -> Vec<(String, u64)> {
        warden
            .four_letter("lgif")
            .lines()
            .map(|l| {
                let (k, v) = l.split_once('\t').expect("key<TAB>value");
                (k.to_owned(), v.parse().expect("a number"))
            })
            .collect()
    };
    let info = lgif(&warden);
    let keys: Vec<&str> = info.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "first_log_idx",
            "first_log_term",
            "last_log_idx",
            "last_log_term",
            "last_committed_log_idx",
            "leader_committed_log_idx",
            "target_committed_log_idx",
            "last_snapshot_idx"
        ]
    );
    let get = |info: &[(String, u64)], key: &str| info.iter().find(|(k, _)| k == key).unwrap().1;
    let last = get(&info, "last_log_idx");
    assert!(
        last >= 20,
        "20 creates and a session are in the log: {info:?}"
    );
    assert_eq!(get(&info, "last_committed_log_idx"), last, "{info:?}");
    assert!(get(&info, "last_log_term") >= 1);

    // csnp answers the committed index the snapshot will cover; lgif then shows it.
    let csnp: u64 = warden.four_letter("csnp").parse().expect("an index");
    assert!(csnp >= last, "{csnp} < {last}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while get(&lgif(&warden), "last_snapshot_idx") < csnp {
        assert!(
            std::time::Instant::now() < deadline,
            "no snapshot at {csnp}: {:?}",
            lgif(&warden)
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let uptm: u64 = warden.four_letter("uptm").parse().expect("seconds");
    assert!(uptm < 600);
}

#[test]
fn words_outside_the_whitelist_are_refused() {
    let warden = Warden::start("4lw.commands.whitelist=ruok\n");
    assert_eq!(warden.four_letter("ruok"), "imok");
    assert_eq!(
        warden.four_letter("dump"),
        "dump is not executed because it is not in the whitelist.\n"
    );
    // ZooKeeper always allows srvr.
    assert!(warden.four_letter("srvr").starts_with("Zookeeper version"));
}

#[test]
fn a_bad_zoo_cfg_value_exits_with_code_2_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPort=2181\ntickTime=soon\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["server", "--zoo-cfg"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tickTime") && stderr.contains("soon"),
        "{stderr}"
    );
}

#[test]
fn help_describes_every_option() {
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["server", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for option in ["--zoo-cfg", "--config", "--print-config", "--check-config"] {
        assert!(help.contains(option), "{help}");
    }
}
