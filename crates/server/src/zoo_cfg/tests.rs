//! zoo.cfg files as operators and test harnesses write them, and every way one can be wrong.

use std::path::{Path, PathBuf};

use super::*;
use crate::config::{Cluster, Member};
use crate::tls::ClientAuth;

/// A temporary directory holding zoo.cfg files; `@DIR@` in a file's text stands for it.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path().join(name);
        let text = text.replace("@DIR@", self.path().to_str().unwrap());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn myid(&self, dir: &str, contents: &str) {
        self.write(&format!("{dir}/myid"), contents);
    }

    fn load(&self, text: &str) -> Result<(Config, Vec<Warning>), ConfigError> {
        Config::from_zoo_cfg(self.write("zoo.cfg", text))
    }
}

/// Reads `text` (after "dataDir=@DIR@/data" and "clientPort=2181", so its own lines start at
/// line 3).
fn load(text: &str) -> Result<(Config, Vec<Warning>), ConfigError> {
    Scratch::new().load(&format!("dataDir=@DIR@/data\nclientPort=2181\n{text}"))
}

fn config(text: &str) -> Config {
    let (config, warnings) = load(text).unwrap();
    assert_eq!(warnings, [], "{text}");
    config
}

fn warnings(text: &str) -> Vec<(usize, String, WarningKind)> {
    let (_, warnings) = load(text).unwrap();
    warnings
        .into_iter()
        .map(|w| (w.line, w.key, w.kind))
        .collect()
}

fn invalid(text: &str) -> String {
    match load(text) {
        Err(err @ ConfigError::Invalid { .. }) => err.to_string(),
        other => panic!("{text}: expected an Invalid error, got {other:?}"),
    }
}

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/zoo_cfg/testdata")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn zoo_sample_cfg() {
    let scratch = Scratch::new();
    let (config, warnings) = scratch.load(&fixture("zoo_sample.cfg")).unwrap();
    assert_eq!(warnings, []);
    assert_eq!(config.tick_time_ms, 2000);
    assert_eq!(config.data_dir, scratch.path().join("zookeeper"));
    assert_eq!(config.log_dir, None);
    assert_eq!(config.resolved_log_dir(), config.data_dir);
    assert_eq!(config.client_listen, HostPort::new("0.0.0.0", 2181));
    assert_eq!(config.session_timeout_ms_min, 4000);
    assert_eq!(config.session_timeout_ms_max, 40_000);
    assert_eq!(config.limits.connections_per_ip_max, 60);
    assert_eq!(config.four_letter_words, ["srvr"]);
    assert_eq!(config.cluster, Cluster::default());
    // ZooKeeper's AdminServer defaults, a taken port only warned about.
    assert!(config.admin.enabled);
    assert_eq!(
        config.admin.address(),
        (&HostPort::new("0.0.0.0", 8080), false)
    );
    assert_eq!(config.admin.command_url, "/commands");
    assert_eq!(config.admin.idle_timeout_ms, 30_000);
    assert_eq!(config.metrics.listen, None);
}

#[test]
fn zoo_sample_cfg_with_its_commented_settings_turned_on() {
    let text = fixture("zoo_sample.cfg").replace("\n#", "\n");
    let text = text
        .lines()
        .filter(|l| l.contains('=') || l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    let (config, warnings) = Scratch::new().load(&text).unwrap();
    assert_eq!(warnings, []);
    assert_eq!(config.limits.connections_per_ip_max, 60);
    assert_eq!(config.purge.snapshots_retained_count, 3);
    assert_eq!(config.purge.interval_hours, 1);
    assert_eq!(config.metrics.listen, Some(HostPort::new("0.0.0.0", 7000)));
}

#[test]
fn three_server_ensemble_each_with_its_myid() {
    let scratch = Scratch::new();
    let members: Vec<Member> = (1..=3)
        .map(|id| Member {
            id,
            host: format!("zoo{id}.example"),
            peer_port: 2888,
            election_port: Some(3888),
            role: Role::Participant,
            client: None,
        })
        .collect();
    for id in 1..=3u64 {
        scratch.myid(&format!("zk{id}"), &format!("{id}\n"));
        let text = fixture("ensemble.cfg").replace("@ID@", &id.to_string());
        let path = scratch.write(&format!("zoo{id}.cfg"), &text);
        let (config, warnings) = Config::from_zoo_cfg(&path).unwrap();
        assert_eq!(warnings, []);
        assert_eq!(config.cluster.my_id, Some(id));
        assert_eq!(config.cluster.members, members);
        assert_eq!(
            config.cluster.me().unwrap().host,
            format!("zoo{id}.example")
        );
        assert_eq!(config.data_dir, scratch.path().join(format!("zk{id}")));
        assert_eq!(
            config.log_dir,
            Some(scratch.path().join(format!("zk{id}-log")))
        );
        assert_eq!(config.client_listen, HostPort::new("0.0.0.0", 2181));
        assert_eq!(config.limits.connections_per_ip_max, 100);
        assert_eq!(config.purge.snapshots_retained_count, 5);
        assert_eq!(config.purge.interval_hours, 24);
        assert_eq!(config.four_letter_words, ["srvr", "ruok", "mntr"]);
    }
}

#[test]
fn go_zookeeper_harness_standalone() {
    let scratch = Scratch::new();
    let (config, warnings) = scratch
        .load(&fixture("go_zookeeper_standalone.cfg"))
        .unwrap();
    assert_eq!(config.client_listen, HostPort::new("0.0.0.0", 12000));
    assert_eq!(config.data_dir, scratch.path().join("srv1"));
    assert_eq!(config.tick_time_ms, 500);
    assert_eq!(config.session_timeout_ms_min, 1000);
    assert_eq!(config.session_timeout_ms_max, 10_000);
    assert!(config.four_letter_word_enabled("ruok"));
    assert!(config.four_letter_word_enabled("srvr"));
    assert_eq!(config.admin.listen, None);
    // The harness asks for reconfig.
    assert_eq!(
        config.cluster,
        Cluster {
            reconfig_enabled: true,
            ..Cluster::default()
        }
    );
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn go_zookeeper_harness_three_servers() {
    let scratch = Scratch::new();
    scratch.myid("srv2", "2\n");
    let (config, warnings) = scratch
        .load(&fixture("go_zookeeper_cluster_srv2.cfg"))
        .unwrap();
    assert_eq!(config.client_listen, HostPort::new("0.0.0.0", 12003));
    assert_eq!(config.cluster.my_id, Some(2));
    let ports: Vec<(u64, &str, u16, Option<u16>)> = config
        .cluster
        .members
        .iter()
        .map(|m| (m.id, m.host.as_str(), m.peer_port, m.election_port))
        .collect();
    assert_eq!(
        ports,
        [
            (1, "127.0.0.1", 12001, Some(12002)),
            (2, "127.0.0.1", 12004, Some(12005)),
            (3, "127.0.0.1", 12007, Some(12008)),
        ]
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(config.cluster.reconfig_enabled);
}

#[test]
fn server_lines_with_roles_client_addresses_and_ipv6() {
    let scratch = Scratch::new();
    scratch.myid("data", "3");
    let (config, warnings) = scratch
        .load(
            "dataDir=@DIR@/data\n\
             server.1=10.0.0.1:2888:3888;2181\n\
             server.2=10.0.0.2:2888:3888:participant;10.0.0.2:2182\n\
             server.3=[fe80::3]:2888:3888:Observer;[::]:2183\n\
             server.4 = zoo4:2888:3888:\\\n    observer\n",
        )
        .unwrap();
    assert_eq!(warnings, []);
    let members = &config.cluster.members;
    assert_eq!(members[0].client, Some(HostPort::new("0.0.0.0", 2181)));
    assert_eq!(members[1].role, Role::Participant);
    assert_eq!(members[1].client, Some(HostPort::new("10.0.0.2", 2182)));
    assert_eq!(members[2].host, "fe80::3");
    assert_eq!(members[2].role, Role::Observer);
    assert_eq!(members[3].role, Role::Observer);
    assert_eq!(members[3].client, None);
    // No clientPort: this server's own server.N line gives the client address.
    assert_eq!(config.client_listen.to_string(), "[::]:2183");
}

#[test]
fn client_port_address_and_client_port() {
    let c = config("clientPortAddress=127.0.0.1\n");
    assert_eq!(c.client_listen, HostPort::new("127.0.0.1", 2181));
    let c = config("clientPortAddress=::1\n");
    assert_eq!(c.client_listen.to_string(), "[::1]:2181");
    let c = config("clientPortAddress=[::1]\n");
    assert_eq!(c.client_listen.to_string(), "[::1]:2181");
    let (c, _) = Scratch::new()
        .load("dataDir=@DIR@/d\nclientPort=0\n")
        .unwrap();
    assert_eq!(
        c.client_listen,
        HostPort::new("0.0.0.0", 0),
        "any free port"
    );
}

#[test]
fn clientport_may_agree_with_this_servers_line() {
    let scratch = Scratch::new();
    scratch.myid("data", "1");
    let text = "dataDir=@DIR@/data\nclientPort=2181\n\
                server.1=a:2888:3888;127.0.0.1:2181\nserver.2=b:2888:3888\nserver.3=c:2888:3888\n";
    let (config, _) = scratch.load(text).unwrap();
    assert_eq!(config.client_listen, HostPort::new("127.0.0.1", 2181));
    let err = scratch
        .load(&text.replace("clientPort=2181", "clientPort=2182"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("server.1, line 3")
            && err.contains("127.0.0.1:2181")
            && err.contains("0.0.0.0:2182"),
        "{err}"
    );
}

#[test]
fn zookeeper_defaults_where_the_file_is_silent() {
    let c = config("");
    assert_eq!(c.tick_time_ms, 3000, "ZooKeeper's DEFAULT_TICK_TIME");
    assert_eq!(c.session_timeout_ms_min, 6000);
    assert_eq!(c.session_timeout_ms_max, 60_000);
    assert_eq!(c.log_dir, None);
    assert_eq!(c.four_letter_words, ["srvr"]);
    // jute.maxbuffer's default; what ZooKeeper lacks keeps Warden's default.
    assert_eq!(
        c.limits,
        crate::config::Limits {
            frame_bytes_max: 0xfffff,
            ..crate::config::Limits::default()
        }
    );
    assert!(c.extended_types_enabled);
    assert_eq!(c.purge.interval_hours, 1);
}

#[test]
fn a_large_jute_maxbuffer_raises_the_peer_frame_with_it() {
    // ZooKeeper's quorum packets obey jute.maxbuffer as well: a create of that size must
    // reach the followers in one peer frame.
    let c = config("jute.maxbuffer=100000000\n");
    assert_eq!(c.limits.frame_bytes_max, 100_000_000);
    assert_eq!(
        c.cluster.peer_frame_bytes_max,
        100_000_000 + crate::config::PEER_FRAME_HEADROOM_BYTES
    );
}

#[test]
fn session_timeouts() {
    let c = config("tickTime=1000\nminSessionTimeout=1500\nmaxSessionTimeout=-1\n");
    assert_eq!(
        (c.session_timeout_ms_min, c.session_timeout_ms_max),
        (1500, 20_000)
    );
    let c = config("tickTime=1000\nminSessionTimeout=-1\nmaxSessionTimeout=5000\n");
    assert_eq!(
        (c.session_timeout_ms_min, c.session_timeout_ms_max),
        (2000, 5000)
    );
}

#[test]
fn snap_size_limit_is_in_kib_and_off_when_not_positive() {
    assert_eq!(config("").snapshots.log_bytes_max, 4 << 30);
    assert_eq!(
        config("snapSizeLimitInKb=4194304\n")
            .snapshots
            .log_bytes_max,
        4 << 30
    );
    for off in ["0", "-1"] {
        let c = config(&format!("snapSizeLimitInKb={off}\n"));
        assert_eq!(c.snapshots.log_bytes_max, 0);
    }
    let c = config("snapSizeLimitInKb=9223372036854775807\n");
    assert_eq!(c.snapshots.log_bytes_max, u64::MAX);
}

#[test]
fn zookeeper_system_properties_with_or_without_their_prefix() {
    let digest = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";
    for prefix in ["", "zookeeper."] {
        let c = config(&format!(
            "{prefix}DigestAuthenticationProvider.superDigest={digest}\n\
             {prefix}extendedTypesEnabled=false\n\
             {prefix}enforceQuota=true\n\
             {prefix}znode.container.checkIntervalMs=1000\n\
             {prefix}znode.container.maxNeverUsedIntervalMs=0x7530\n\
             {prefix}znode.container.maxPerMinute=600\n\
             {prefix}jute.maxbuffer=0x2000000\n\
             {prefix}snapCount=50000\n\
             {prefix}snapSizeLimitInKb=2048\n\
             {prefix}maxCnxns=0\n\
             {prefix}globalOutstandingLimit=#3e8\n\
             {prefix}4lw.commands.whitelist=stat, ruok, conf, isro\n\
             {prefix}emulate353TTLNodes=true\n"
        ));
        assert_eq!(c.super_digest.as_deref(), Some(digest));
        assert!(!c.extended_types_enabled);
        assert!(c.enforce_quota);
        assert_eq!(c.containers.check_interval_ms, 1000);
        assert_eq!(c.containers.never_used_interval_ms, 30_000);
        assert_eq!(c.containers.deletes_per_minute_max, 600);
        assert_eq!(c.limits.frame_bytes_max, 32 << 20);
        assert!(c.limits.outbound_queue_bytes_per_session_max >= 4 * (32 << 20));
        assert_eq!(c.cluster.peer_frame_bytes_max, 64 << 20);
        assert_eq!(c.snapshots.interval_txns, 50_000);
        assert_eq!(c.snapshots.log_bytes_max, 2 << 20);
        assert_eq!(c.limits.connections_max, 0);
        assert_eq!(c.limits.outstanding_requests_max, 1000);
        assert_eq!(
            c.four_letter_words,
            ["srvr", "stat", "ruok", "conf", "isro"]
        );
    }
}

#[test]
fn four_letter_word_whitelist() {
    assert_eq!(
        config("4lw.commands.whitelist=*\n").four_letter_words,
        ["*"]
    );
    assert_eq!(
        config("4lw.commands.whitelist=ruok, *\n").four_letter_words,
        ["*"]
    );
    assert_eq!(
        config("4lw.commands.whitelist=\n").four_letter_words,
        ["srvr"],
        "ZooKeeper always answers srvr"
    );
    assert_eq!(
        warnings("4lw.commands.whitelist=ruok,rouk\n"),
        [(
            3,
            "4lw.commands.whitelist".to_string(),
            WarningKind::Adjusted("unknown four-letter word \"rouk\" left out".into())
        )]
    );
    let (c, _) = load("readonlymode.enabled=true\n4lw.commands.whitelist=ruok\n").unwrap();
    assert_eq!(c.four_letter_words, ["srvr", "ruok", "isro"]);
}

#[test]
fn the_ensemble_to_follow() {
    let c = config("migration.follow=zk1:2888,zk2:2888\nmigration.observerId=4\n");
    assert_eq!(c.migration.addresses(), ["zk1:2888", "zk2:2888"]);
    assert_eq!(c.migration.observer_id, Some(4));
    assert!(
        load("migration.follow=zk1:2888\n").is_err(),
        "an observer id is needed"
    );
}

#[test]
fn admin_and_metrics_endpoints() {
    let c = config("admin.enableServer=true\n");
    assert!(c.admin.enabled);
    assert_eq!(c.admin.address(), (&HostPort::new("0.0.0.0", 8080), false));
    assert_eq!(
        config("admin.serverPort=9090\n").admin.address(),
        (&HostPort::new("0.0.0.0", 9090), true)
    );
    assert_eq!(
        config("admin.serverAddress=127.0.0.1\n").admin.listen,
        Some(HostPort::new("127.0.0.1", 8080))
    );
    assert_eq!(
        config("admin.serverAddress=127.0.0.1\nadmin.serverPort=9090\n")
            .admin
            .listen,
        Some(HostPort::new("127.0.0.1", 9090))
    );
    assert!(
        !config("admin.enableServer=false\nadmin.serverPort=9090\n")
            .admin
            .enabled
    );
    // The system-property spelling a -D flag would use.
    assert!(!config("zookeeper.admin.enableServer=false\n").admin.enabled);
    let c = config("admin.commandURL=/zk\nadmin.idleTimeout=5000\n");
    assert_eq!(c.admin.command_url, "/zk");
    assert_eq!(c.admin.idle_timeout_ms, 5000);
    // --print-config says where an unnamed zoo.cfg admin server goes.
    let printed = config("").to_toml_string();
    assert!(
        printed.contains("[admin]\n# listen: none named; tries 0.0.0.0:8080 and runs"),
        "{printed}"
    );
    assert!(!Config::default().to_toml_string().contains("# listen"));
    assert!(load("admin.commandURL=commands\n").is_err());
    assert!(load("admin.idleTimeout=0\n").is_err());
    // snapshot and restore: on by default, off by anything but "true" (Boolean.parseBoolean).
    let c = config("");
    assert!(c.admin.snapshot_enabled && c.admin.restore_enabled);
    assert_eq!(c.admin.rate_limit_interval_ms, 300_000);
    let c = config(
        "admin.snapshot.enabled=no\nzookeeper.admin.restore.enabled=FALSE\n\
         admin.rateLimiterIntervalInMS=10\n",
    );
    assert!(!c.admin.snapshot_enabled && !c.admin.restore_enabled);
    assert_eq!(c.admin.rate_limit_interval_ms, 10);
    assert!(
        config("admin.snapshot.enabled=TRUE\n")
            .admin
            .snapshot_enabled
    );
    assert!(load("admin.rateLimiterIntervalInMS=-1\n").is_err());
    let prometheus = "metricsProvider.className=\
                      org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n";
    assert_eq!(
        config(&format!(
            "{prometheus}metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort=7001\n\
             metricsProvider.exportJvmInfo=false\n"
        ))
        .metrics
        .listen,
        Some(HostPort::new("127.0.0.1", 7001))
    );
    assert_eq!(
        config("metricsProvider.httpPort=7001\n").metrics.address(),
        None
    );
    // ZooKeeper's default address, given up with an error if taken.
    let named_none = config(prometheus);
    assert_eq!(
        named_none.metrics.address(),
        Some((&HostPort::new("0.0.0.0", 7000), false))
    );
    assert!(named_none.metrics.process);
    assert!(
        !config(&format!(
            "{prometheus}metricsProvider.exportJvmInfo=false\n"
        ))
        .metrics
        .process
    );
    assert!(load("metricsProvider.exportJvmInfo=maybe\n").is_err());
}

#[test]
fn metrics_over_https_as_zookeeper_3_10_reads_it() {
    let prometheus = "metricsProvider.className=\
                      org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
                      metricsProvider.httpHost=127.0.0.1\n";
    let stores = "metricsProvider.ssl.keyStore.location=/m/key.p12\n\
                  metricsProvider.ssl.keyStore.password=kp\n\
                  metricsProvider.ssl.keyStore.type=PKCS12\n\
                  metricsProvider.ssl.trustStore.location=/m/ca.pem\n";
    let c = config(&format!(
        "{prometheus}metricsProvider.httpPort=7000\nmetricsProvider.httpsPort=7443\n{stores}\
         metricsProvider.ssl.enabledProtocols=TLSv1.3, TLSv1.2\n\
         metricsProvider.ssl.ciphersuites=TLS_AES_128_GCM_SHA256,\
         TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n"
    ));
    let m = &c.metrics;
    assert_eq!(m.listen, Some(HostPort::new("127.0.0.1", 7000)));
    assert_eq!(m.https_listen, Some(HostPort::new("127.0.0.1", 7443)));
    assert!(!m.unified());
    let key_store = m.tls.key_store.as_ref().unwrap();
    assert_eq!(key_store.location, PathBuf::from("/m/key.p12"));
    assert_eq!(key_store.password.as_deref(), Some("kp"));
    assert_eq!(key_store.kind.as_deref(), Some("PKCS12"));
    assert_eq!(
        m.tls.trust_store.as_ref().unwrap().location,
        PathBuf::from("/m/ca.pem")
    );
    // ZooKeeper's secure default: need.client.auth and want.client.auth true.
    assert_eq!(m.tls.client_auth, ClientAuth::Need);
    assert_eq!(m.tls.enabled_protocols, ["TLSv1.3", "TLSv1.2"]);
    assert_eq!(
        m.tls.cipher_suites,
        [
            "TLS_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
        ]
    );

    // httpsPort alone: HTTPS only, no plain endpoint on 7000 (ZooKeeper 3.10).
    let only = config(&format!(
        "{prometheus}metricsProvider.httpsPort=7443\n{stores}"
    ));
    assert_eq!(only.metrics.address(), None);
    // Equal ports: one port for both.
    let unified = config(&format!(
        "{prometheus}metricsProvider.httpPort=7443\nmetricsProvider.httpsPort=7443\n{stores}"
    ));
    assert!(unified.metrics.unified());

    let auth = |need: &str, want: &str, trust: bool| {
        let trust = if trust {
            "metricsProvider.ssl.trustStore.location=/m/ca.pem\n"
        } else {
            ""
        };
        config(&format!(
            "{prometheus}metricsProvider.httpsPort=7443\n\
             metricsProvider.ssl.keyStore.location=/m/key.pem\n{trust}{need}{want}"
        ))
        .metrics
        .tls
        .client_auth
    };
    let no_need = "metricsProvider.ssl.need.client.auth=false\n";
    let no_want = "metricsProvider.ssl.want.client.auth=false\n";
    assert_eq!(auth(no_need, "", true), ClientAuth::Want);
    assert_eq!(auth(no_need, no_want, true), ClientAuth::None);
    // want with nothing to check a certificate against asks for none.
    assert_eq!(auth(no_need, "", false), ClientAuth::None);
    // need without a trust store is refused, as ZooKeeper refuses it.
    assert!(
        invalid(&format!(
            "{prometheus}metricsProvider.httpsPort=7443\n\
             metricsProvider.ssl.keyStore.location=/m/key.pem\n"
        ))
        .contains("needs a trust store")
    );
    assert!(
        invalid(&format!("{prometheus}metricsProvider.httpsPort=7443\n"))
            .contains("metricsProvider.ssl.keyStore.location")
    );
    assert!(load("metricsProvider.httpsPort=x\n").is_err());

    // Without httpsPort ZooKeeper reads no ssl key: warned about, and no HTTPS.
    let (c, warned) = load(&format!("{prometheus}{stores}")).unwrap();
    assert_eq!(c.metrics.https_listen, None);
    assert!(c.metrics.tls.is_default());
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(warned[0].key, "metricsProvider.ssl.keyStore.location");
    assert_eq!(warned[0].line, 5);
    // Nor without the Prometheus provider.
    let (c, _) = load(&format!("metricsProvider.httpsPort=7443\n{stores}")).unwrap();
    assert_eq!(c.metrics.https_listen, None);
    assert_eq!(
        warnings("metricsProvider.ssl.keyStore.locaton=/k\n")[0].2,
        WarningKind::UnknownKey
    );
}

#[test]
fn properties_syntax_as_java_reads_it() {
    let c = config(
        "  # indented comment\n\
         ! bang comment\n\
         tickTime : 1000\n\
         maxClientCnxns 10\n\
         4lw.commands.whitelist=ruok,\\\n    stat\n",
    );
    assert_eq!(c.tick_time_ms, 1000);
    assert_eq!(c.limits.connections_per_ip_max, 10);
    assert_eq!(c.four_letter_words, ["srvr", "ruok", "stat"]);

    let err = load("tickTime=\\u00zz\n").unwrap_err();
    assert!(
        matches!(err, ConfigError::Syntax { line: 3, .. }),
        "{err:?}"
    );
}

#[test]
fn non_ascii_data_dirs() {
    let scratch = Scratch::new();
    let (c, _) = scratch
        .load("dataDir=@DIR@/données\nclientPort=2181\n")
        .unwrap();
    assert_eq!(c.data_dir, scratch.path().join("données"));
    // Not UTF-8: read as ISO-8859-1, as Java reads it.
    let path = scratch.path().join("latin1.cfg");
    let mut bytes = format!("dataDir={}/donn", scratch.path().display()).into_bytes();
    bytes.extend_from_slice(b"\xe9es\nclientPort=2181\n");
    std::fs::write(&path, bytes).unwrap();
    let (c, _) = Config::from_zoo_cfg(&path).unwrap();
    assert_eq!(c.data_dir, scratch.path().join("données"));
}

#[test]
fn dynamic_config_file() {
    let scratch = Scratch::new();
    scratch.myid("data", "2");
    let members = "server.1=a:2888:3888:participant;0.0.0.0:2181\n\
                   server.2=b:2888:3888:participant;0.0.0.0:2182\n\
                   server.3=c:2888:3888:participant;0.0.0.0:2183";
    scratch.write("zoo.cfg.dynamic.100000000", members);
    let main = "dataDir=@DIR@/data\ndynamicConfigFile=@DIR@/zoo.cfg.dynamic.100000000\n";
    let (c, warnings) = scratch.load(main).unwrap();
    assert_eq!(warnings, []);
    assert_eq!(c.cluster.members.len(), 3);
    assert_eq!(c.client_listen, HostPort::new("0.0.0.0", 2182));
    // The version is the hex number the file's name ends in (ZooKeeper's
    // getVersionFromFilename), 0 when it ends in none.
    let files = c.zoo_cfg.unwrap();
    assert_eq!(files.path, scratch.path().join("zoo.cfg"));
    assert_eq!(files.dynamic_version, Some(0x1_0000_0000));
    scratch.write("members", members);
    let (c, _) = scratch
        .load("dataDir=@DIR@/data\ndynamicConfigFile=@DIR@/members\n")
        .unwrap();
    assert_eq!(c.zoo_cfg.unwrap().dynamic_version, Some(0));
    let (c, _) = scratch
        .load("dataDir=@DIR@/data\nclientPort=2182\nserver.1=a:1:2\nserver.2=b:1:2\n")
        .unwrap();
    assert_eq!(c.zoo_cfg.unwrap().dynamic_version, None);

    let err = scratch
        .load(&format!("{main}server.1=a:2888:3888\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("server.1 (line 3) must be in the dynamic config file"),
        "{err}"
    );

    // ZooKeeper refuses a version line inside the file: "dynamic file shouldn't have version
    // inside".
    scratch.write(
        "zoo.cfg.dynamic.100000000",
        &format!("{members}\nversion=100000000\n"),
    );
    let err = scratch.load(main).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Value { key, line: 4, reason, .. }
            if key == "version" && reason.contains("shouldn't have version inside")),
        "{err:?}"
    );

    scratch.write(
        "zoo.cfg.dynamic.100000000",
        "server.1=a:2888:3888\ntickTime=5\n",
    );
    let err = scratch.load(main).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Value { path, key, line: 2, .. }
            if key == "tickTime" && path.ends_with("zoo.cfg.dynamic.100000000")),
        "{err:?}"
    );

    scratch.write("zoo.cfg.dynamic.-1", members);
    let err = scratch
        .load("dataDir=@DIR@/data\ndynamicConfigFile=@DIR@/zoo.cfg.dynamic.-1\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("negative"), "{err}");
}

#[test]
fn a_single_server_line_runs_standalone_as_in_zookeeper() {
    let scratch = Scratch::new();
    scratch.myid("data", "1\n");
    let (c, warnings) = scratch
        .load("dataDir=@DIR@/data\nserver.1=localhost:2888:3888;2191\n")
        .unwrap();
    assert_eq!(c.cluster.members, []);
    assert_eq!(c.cluster.my_id, Some(1));
    assert_eq!(c.client_listen, HostPort::new("0.0.0.0", 2191));
    assert!(
        matches!(&warnings[..], [w] if w.key == "server.1" && w.line == 2),
        "{warnings:?}"
    );

    // With standaloneEnabled=false the same line is a one-server ensemble.
    let (c, warnings) = scratch
        .load("dataDir=@DIR@/data\nstandaloneEnabled=false\nserver.1=localhost:2888:3888;2191\n")
        .unwrap();
    assert_eq!(warnings, []);
    assert_eq!(c.cluster.members.len(), 1);
    assert_eq!(c.cluster.my_id, Some(1));
}

#[test]
fn unknown_keys_are_warnings_naming_key_and_line() {
    let (c, warnings) = load("tickTime=2000\nfooBar=1\n\nzookeeper.clientPort=7\n").unwrap();
    assert_eq!(c.tick_time_ms, 2000);
    let found: Vec<(usize, &str, &WarningKind)> = warnings
        .iter()
        .map(|w| (w.line, w.key.as_str(), &w.kind))
        .collect();
    assert_eq!(
        found,
        [
            (4, "fooBar", &WarningKind::UnknownKey),
            (6, "zookeeper.clientPort", &WarningKind::UnknownKey)
        ]
    );
    let text = warnings[0].to_string();
    assert!(
        text.ends_with("zoo.cfg:4: fooBar: unknown key, ignored"),
        "{text}"
    );
}

#[test]
fn a_repeated_key_warns_and_the_last_value_wins() {
    let (c, warnings) = load("clientPort=2182\n").unwrap();
    assert_eq!(c.client_listen.port, 2182);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].line, 2);
    assert_eq!(warnings[0].kind, WarningKind::Overridden { by_line: 3 });
}

#[test]
fn settings_warden_does_not_honour_warn() {
    for line in [
        "forceSync=no",
        "ssl.sslProvider=OPENSSL",
        "skipACL=yes",
        "localSessionsEnabled=true",
        "ssl.quorum.sslProvider=OPENSSL",
        "quorum.auth.enableSasl=true",
        "quorumListenOnAllIPs=true",
        "allowSaslFailedClients=true",
        "letAnySaslUserDoX=jaasuser",
        "SASLAuthenticationProvider.superPassword=secret",
        "authProvider.1=com.example.KerberosAuthenticationProvider",
        "metricsProvider.className=com.example.StatsdProvider",
        "oraclePath=/oracle",
    ] {
        let found = warnings(&format!("{line}\n"));
        let key = line.split('=').next().unwrap();
        assert!(
            matches!(&found[..], [(3, k, WarningKind::Unsupported(_))] if k == key),
            "{line}: {found:?}"
        );
    }
}

#[test]
fn tls_settings_are_read_as_zookeeper_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let password_file = dir.path().join("pw");
    std::fs::write(&password_file, "from-file\n").unwrap();
    let c = config(&format!(
        "secureClientPort=2281\nsecureClientPortAddress=127.0.0.2\n\
         zookeeper.client.portUnification=true\nclient.certReload=true\n\
         ssl.keyStore.location=/etc/zk/server.jks\nssl.keyStore.password=pw\n\
         ssl.keyStore.passwordPath={}\nssl.trustStore.location=/etc/zk/ca.pem\n\
         ssl.trustStore.type=PEM\nssl.clientAuth=WANT\nssl.protocol=TLSv1.2\n\
         ssl.enabledProtocols= TLSv1.2 ,\n\
         ssl.ciphersuites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n\
         ssl.handshakeDetectionTimeoutMillis=2500\nssl.hostnameVerification=false\n\
         ssl.authProvider=x509\n\
         authProvider.2=org.apache.zookeeper.server.auth.X509AuthenticationProvider\n\
         X509AuthenticationProvider.superUser=CN=admin\n",
        password_file.display()
    ));
    let t = &c.tls;
    assert_eq!(
        t.secure_client_listen.as_ref().unwrap().to_string(),
        "127.0.0.2:2281"
    );
    assert!(t.port_unification && t.reload_cert_files);
    let key = t.key_store.as_ref().unwrap();
    // ZooKeeper: the password file wins.
    assert_eq!(key.password.as_deref(), Some("from-file"));
    assert_eq!(
        key.store_type().unwrap(),
        crate::tls::settings::StoreType::Jks
    );
    assert_eq!(t.trust_store.as_ref().unwrap().kind.as_deref(), Some("PEM"));
    assert_eq!(t.client_auth, ClientAuth::Want);
    assert_eq!(t.protocol, "TLSv1.2");
    assert_eq!(t.enabled_protocols, ["TLSv1.2"]);
    assert_eq!(t.cipher_suites.len(), 2);
    assert_eq!(t.handshake_timeout_ms, 2500);
    assert_eq!(t.super_user.as_deref(), Some("CN=admin"));
    // Without secureClientPort, the default wildcard address and no TLS.
    let c = config("secureClientPort=2281\nssl.keyStore.location=/k.pem\nssl.clientAuth=none\n");
    assert_eq!(
        c.tls.secure_client_listen.unwrap().to_string(),
        "0.0.0.0:2281"
    );
    assert!(!config("").tls.enabled());
    // secureClientPort and no clientPort: the one client port is the TLS one.
    let (c, _) = Scratch::new()
        .load(
            "dataDir=@DIR@/data\nsecureClientPort=2281\nsecureClientPortAddress=127.0.0.1\n\
             ssl.keyStore.location=/k.pem\nssl.clientAuth=none\n",
        )
        .unwrap();
    assert_eq!(c.client_listen.to_string(), "127.0.0.1:2281");
    assert!(c.tls.client_listen_tls_only && c.tls.secure_client_listen.is_none());
}

#[test]
fn quorum_tls_settings_are_read_as_zookeeper_reads_them() {
    let c = config(
        "sslQuorum=true\nportUnification=true\nsslQuorumReloadCertFiles=true\n\
         ssl.quorum.keyStore.location=/etc/zk/quorum.p12\nssl.quorum.keyStore.password=qpw\n\
         ssl.quorum.trustStore.location=/etc/zk/quorum-ca.jks\n\
         ssl.quorum.trustStore.password=tpw\nssl.quorum.protocol=TLSv1.2\n\
         zookeeper.ssl.quorum.enabledProtocols=TLSv1.2\n\
         ssl.quorum.ciphersuites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n\
         ssl.quorum.hostnameVerification=false\nssl.quorum.clientAuth=need\n\
         ssl.quorum.handshakeDetectionTimeoutMillis=1500\n\
         ssl.keyStore.location=/etc/zk/client.pem\n",
    );
    let q = &c.quorum_tls;
    assert!(q.enabled && q.port_unification && q.reload_cert_files);
    assert!(!q.hostname_verification);
    let key = q.key_store.as_ref().unwrap();
    assert_eq!(key.location, std::path::Path::new("/etc/zk/quorum.p12"));
    assert_eq!(key.password.as_deref(), Some("qpw"));
    let trust = q.trust_store.as_ref().unwrap();
    assert_eq!(trust.password.as_deref(), Some("tpw"));
    assert_eq!(
        (q.protocol.as_str(), q.handshake_timeout_ms),
        ("TLSv1.2", 1500)
    );
    assert_eq!(q.enabled_protocols, ["TLSv1.2"]);
    assert_eq!(q.cipher_suites, ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);
    // The client ports' keys stay theirs.
    assert_eq!(
        c.tls.key_store.unwrap().location,
        std::path::Path::new("/etc/zk/client.pem")
    );
    assert!(!config("").quorum_tls.in_use());
    // The admin server's HTTPS, with the quorum key material: forceHttps wins.
    use crate::config::AdminHttps;
    assert_eq!(config("").admin.https, AdminHttps::Off);
    let stores = "ssl.quorum.keyStore.location=/k.pem\nssl.quorum.trustStore.location=/t.pem\n";
    let c = config(&format!(
        "admin.portUnification=true\nadmin.needClientAuth=true\n{stores}"
    ));
    assert_eq!(
        (c.admin.https, c.admin.need_client_auth),
        (AdminHttps::Either, true)
    );
    let c = config(&format!(
        "admin.portUnification=true\nzookeeper.admin.forceHttps=true\n{stores}"
    ));
    assert_eq!(c.admin.https, AdminHttps::Only);
    for (line, why) in [
        ("ssl.quorum.clientAuth=want", "only need"),
        ("ssl.quorum.crl=true", "no CRLs"),
        (
            "ssl.quorum.context.supplier.class=x.Y",
            "builds its TLS context",
        ),
    ] {
        let err = Scratch::new()
            .load(&format!("dataDir=@DIR@/data\nclientPort=2181\n{line}\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(why), "{line}: {err}");
    }
    // Quorum TLS without its stores is refused at the start, saying what is missing.
    let err = Scratch::new()
        .load("dataDir=@DIR@/data\nclientPort=2181\nsslQuorum=true\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("ssl.quorum.keyStore.location"), "{err}");
}

#[test]
fn the_connection_throttle_is_read_as_zookeeper_reads_it() {
    let c = config(
        "zookeeper.connection_throttle_tokens=50\nconnection_throttle_fill_time=100\n\
         connection_throttle_fill_count=5\nconnection_throttle_weight_enabled=true\n\
         connection_throttle_global_session_weight=4\nconnection_throttle_renew_session_weight=2\n\
         connection_throttle_local_session_weight=1\nconnection_throttle_freeze_time=-1\n",
    );
    let t = &c.limits.connection_throttle;
    assert_eq!((t.tokens, t.fill_time_ms, t.fill_count), (50, 100, 5));
    assert!(t.weight_enabled);
    assert_eq!((t.global_session_weight, t.renew_session_weight), (4, 2));
    assert_eq!(config("").limits.connection_throttle.tokens, 0);
    let found = warnings("connection_throttle_freeze_time=100\n");
    assert!(
        matches!(&found[..], [(3, _, WarningKind::Unsupported(_))]),
        "{found:?}"
    );
}

#[test]
fn the_request_throttler_bounds_requests_in_process_with_the_outstanding_limit() {
    let c = config("globalOutstandingLimit=5000\nrequest_throttle_max_requests=800\n");
    assert_eq!(c.limits.outstanding_requests_max, 800);
    let c = config(
        "request_throttle_max_requests=0\nzookeeper.request_throttle_stall_time=100\n\
         request_throttle_drop_stale=true\nthrottled_op_wait_time=0\n",
    );
    assert_eq!(
        c.limits.outstanding_requests_max,
        crate::config::Limits::default().outstanding_requests_max
    );
    let found = warnings("throttled_op_wait_time=50\n");
    assert!(
        matches!(&found[..], [(3, _, WarningKind::Unsupported(_))]),
        "{found:?}"
    );
}

#[test]
fn sasl_settings_are_read_as_zookeeper_reads_them() {
    let c = config("authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n");
    assert!(c.auth.sasl_scheme);
    assert_eq!(
        (c.auth.jaas_file, c.auth.jaas_section.as_str()),
        (None, "Server")
    );
    assert!(c.auth.required_schemes.is_empty());
    let c = config("sasl.serverconfig=ZkServer\nsuperUser=admin\nzookeeper.superUser.2=root\n");
    assert!(!c.auth.sasl_scheme);
    assert_eq!(c.auth.jaas_section, "ZkServer");
    assert_eq!(c.auth.sasl_super_users, ["admin", "root"]);
}

#[test]
fn jaas_settings_come_from_jvm_flags_and_zoo_cfg_wins() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zoo.cfg");
    std::fs::write(
        &path,
        format!(
            "dataDir={}\nclientPort=2181\nsasl.serverconfig=FromFile\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let flags = "-Xmx512m -Djava.security.auth.login.config=/etc/zk/jaas.conf \
                 -Dzookeeper.sasl.serverconfig=FromFlags -Dzookeeper.superUser=admin -Dother=1 \
                 -Dzookeeper.authProvider.3=org.apache.zookeeper.server.auth.SASLAuthenticationProvider";
    let (c, warnings) = Config::from_zoo_cfg_with_jvm_flags(&path, flags).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        c.auth.jaas_file.as_deref(),
        Some(Path::new("/etc/zk/jaas.conf"))
    );
    assert_eq!(c.auth.jaas_section, "FromFile");
    assert_eq!(c.auth.sasl_super_users, ["admin"]);
    assert!(c.auth.sasl_scheme);
}

#[test]
fn required_authentication_is_read_as_zookeepers_authentication_helper() {
    const SASL: &str =
        "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n";
    let c = config(&format!("{SASL}sessionRequireClientSASLAuth=true\n"));
    assert_eq!(c.auth.required_schemes, ["sasl"]);
    assert!(c.auth.sasl_required());
    let c = config("enforce.auth.enabled=true\nenforce.auth.schemes=digest, ip\n");
    assert_eq!(c.auth.required_schemes, ["digest", "ip"]);
    assert!(!c.auth.sasl_required());
    // Schemes without enforce.auth.enabled=true require nothing.
    let c = config("enforce.auth.schemes=digest\n");
    assert!(c.auth.required_schemes.is_empty());
    for (text, needle) in [
        ("enforce.auth.enabled=true\n", "needs enforce.auth.schemes"),
        (
            "sessionRequireClientSASLAuth=true\n",
            "\"sasl\", which is not available",
        ),
        (
            "enforce.auth.enabled=true\nenforce.auth.schemes=x509\n",
            "\"x509\", which is not available",
        ),
    ] {
        let message = load(text).unwrap_err().to_string();
        assert!(message.contains(needle), "{text}: {message}");
    }
}

#[test]
fn zookeeper_tuning_and_settings_already_true_of_warden_are_silent() {
    config(
        "initLimit=10\nsyncLimit=5\nconnectToLearnerMasterLimit=10\nelectionAlg=3\n\
         peerType=participant\nsyncEnabled=true\nstandaloneEnabled=true\nreconfigEnabled=false\n\
         forceSync=yes\nskipACL=no\npreAllocSize=65536\nsnapSizeLimitInKb=4194304\n\
         admin.enableServer=false\nadmin.idleTimeout=30000\nssl.keyStore.location=/k\n\
         zookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
         authProvider.1=org.apache.zookeeper.server.auth.DigestAuthenticationProvider\n\
         metricsProvider.exportJvmInfo=true\njvm.pause.monitor=false\n\
         quorum.cnxn.threads.size=20\nmultiAddress.enabled=false\nlearner.asyncSending=true\n",
    );
}

#[test]
fn values_zookeeper_adjusts_are_adjusted_with_a_warning() {
    let (c, warnings) =
        load("autopurge.snapRetainCount=1\nsnapCount=1\nmaxCnxns=-5\nautopurge.purgeInterval=-2\n")
            .unwrap();
    assert_eq!(c.purge.snapshots_retained_count, 3);
    assert_eq!(c.snapshots.interval_txns, 2);
    assert_eq!(c.limits.connections_max, 0);
    assert_eq!(
        c.purge.interval_hours, 0,
        "ZooKeeper: zero or negative is off"
    );
    let adjusted: Vec<(usize, &str)> = warnings
        .iter()
        .filter(|w| matches!(w.kind, WarningKind::Adjusted(_)))
        .map(|w| (w.line, w.key.as_str()))
        .collect();
    assert_eq!(
        adjusted,
        [
            (3, "autopurge.snapRetainCount"),
            (4, "snapCount"),
            (5, "maxCnxns")
        ]
    );
}

#[test]
fn each_bad_value_is_an_error_naming_key_value_and_line() {
    for line in [
        "clientPort=abc",
        "clientPort=65536",
        "clientPort=-1",
        "clientPort=2181 # the client port",
        "clientPortAddress=",
        "tickTime=0",
        "tickTime=-5",
        "tickTime=fast",
        "tickTime=200000000",
        "minSessionTimeout=0",
        "minSessionTimeout=-2",
        "maxSessionTimeout=4s",
        "maxClientCnxns=-1",
        "initLimit=ten",
        "electionAlg=1",
        "peerType=leader",
        "standaloneEnabled=maybe",
        "reconfigEnabled=yes",
        "extendedTypesEnabled=yes",
        "zookeeper.extendedTypesEnabled=1",
        "enforceQuota=yes",
        "snapCount=lots",
        "jute.maxbuffer=0",
        "jute.maxbuffer=1M",
        "jute.maxbuffer=4294967296",
        "globalOutstandingLimit=0",
        "autopurge.purgeInterval=hourly",
        "autopurge.snapRetainCount=3.5",
        "znode.container.checkIntervalMs=0",
        "znode.container.maxNeverUsedIntervalMs=-1",
        "DigestAuthenticationProvider.superDigest=secret",
        "admin.serverPort=99999",
        "metricsProvider.httpPort=x",
        "dataLogDir=",
        "server.1=zoo1:2888",
        "server.1=zoo1:2888:2888",
        "server.1=zoo1:2888:38x8",
        "server.1=zoo1:0:3888",
        "server.1=zoo1:2888:3888:leader",
        "server.1=zoo1:2888:3888:observer:extra",
        "server.1=zoo1:2888:3888;2181;2182",
        "server.1=zoo1:2888:3888;host:port",
        "server.1=zoo1:2888:3888;a:b:2181",
        "server.1=zoo1:2888:3888|zoo1b:2888:3888",
        "server.1=[::1:2888:3888",
        "server.1=[::1]",
        "server.1=:2888:3888",
        "server.x=zoo1:2888:3888",
        "server.=zoo1:2888:3888",
        "server.-1=zoo1:2888:3888",
        "group.1=1:2:3",
        "weight.1=1",
    ] {
        let (key, value) = line.split_once('=').unwrap();
        match load(&format!("{line}\n")) {
            Err(err @ ConfigError::Value { .. }) => {
                let ConfigError::Value {
                    line: at,
                    key: k,
                    value: v,
                    ..
                } = &err
                else {
                    unreachable!()
                };
                assert_eq!((*at, k.as_str(), v.as_str()), (3, key, value), "{line}");
                let message = err.to_string();
                assert!(
                    message.contains(&format!("zoo.cfg:3: {line}: ")),
                    "{message}"
                );
            }
            other => panic!("{line}: expected a bad value error, got {other:?}"),
        }
    }
}

#[test]
fn the_hint_about_end_of_line_comments() {
    let err = load("clientPort=2181 # the client port\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("no comments at the end of a line"), "{err}");
}

#[test]
fn a_server_id_given_twice() {
    let err = load("server.1=a:2888:3888\nserver.01=b:2888:3888\n").unwrap_err();
    assert!(
        err.to_string()
            .contains("server 1 is already given on line 3"),
        "{err}"
    );
}

#[test]
fn values_that_do_not_work_together_are_errors_naming_both() {
    let message = invalid("tickTime=2000\nmaxSessionTimeout=3000\n");
    assert!(
        message.contains("minSessionTimeout=4000 (2 × tickTime on line 3)")
            && message.contains("maxSessionTimeout=3000 (line 4)"),
        "{message}"
    );
    let message = invalid("minSessionTimeout=9000\nmaxSessionTimeout=8000\n");
    assert!(
        message.contains(
            "minSessionTimeout=9000 (line 3) is larger than maxSessionTimeout=8000 (line 4)"
        ),
        "{message}"
    );
    let message = invalid("maxSessionTimeout=5000\n");
    assert!(message.contains("(2 × the default tickTime)"), "{message}");
    let message = invalid("server.1=a:2888:3888:observer\n");
    assert!(
        message.contains("observers but no participant"),
        "{message}"
    );
    let message = invalid("standaloneEnabled=false\n");
    assert!(
        message.contains("standaloneEnabled=false needs"),
        "{message}"
    );
    let message = invalid("server.1=a:2888:3888\nserver.2=b:2888:3888:observer\n");
    assert!(message.contains("observers need an ensemble"), "{message}");
}

#[test]
fn missing_settings() {
    let scratch = Scratch::new();
    let err = scratch.load("clientPort=2181\n").unwrap_err().to_string();
    assert!(err.contains("dataDir is not set"), "{err}");
    let err = scratch.load("dataDir=@DIR@/d\n").unwrap_err().to_string();
    assert!(err.contains("clientPort is not set"), "{err}");
    let err = scratch
        .load("dataDir=@DIR@/d\nclientPortAddress=127.0.0.1\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("clientPortAddress is set (line 2) but clientPort is not"),
        "{err}"
    );
    let err = Config::from_zoo_cfg(scratch.path().join("absent.cfg")).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err}");
}

#[test]
fn myid_problems_when_server_lines_exist() {
    let ensemble = "dataDir=@DIR@/data\nclientPort=2181\n\
                    server.1=a:2888:3888\nserver.2=b:2888:3888\nserver.3=c:2888:3888\n";
    let scratch = Scratch::new();
    let myid_error = |scratch: &Scratch| match scratch.load(ensemble) {
        Err(err @ ConfigError::Invalid { .. }) => {
            let ConfigError::Invalid { path, .. } = &err else {
                unreachable!()
            };
            assert_eq!(path, &scratch.path().join("data/myid"));
            err.to_string()
        }
        other => panic!("expected a myid error, got {other:?}"),
    };
    assert!(myid_error(&scratch).contains("myid file is missing"));
    for garbled in ["", "one\n", "-1", "1.0", "0x1", "99999999999999999999999"] {
        scratch.myid("data", garbled);
        let message = myid_error(&scratch);
        assert!(
            message.contains(&format!("{:?} is not a server id", garbled.trim())),
            "{message}"
        );
    }
    scratch.myid("data", "4\n");
    assert!(myid_error(&scratch).contains("myid is 4 but there is no server.4 line"));
    scratch.myid("data", " 2 \r\nrest is ignored");
    let (c, _) = scratch.load(ensemble).unwrap();
    assert_eq!(c.cluster.my_id, Some(2));

    // ZooKeeper reads a myid file even standalone, and refuses a garbled one.
    scratch.myid("data", "two");
    let err = scratch
        .load("dataDir=@DIR@/data\nclientPort=2181\n")
        .unwrap_err();
    assert!(
        err.to_string().contains("\"two\" is not a server id"),
        "{err}"
    );
}

#[test]
fn java_number_forms() {
    assert_eq!(java_decode("100"), Some(100));
    assert_eq!(java_decode("+100"), Some(100));
    assert_eq!(java_decode("-100"), Some(-100));
    assert_eq!(java_decode("0x1F"), Some(31));
    assert_eq!(java_decode("0X1f"), Some(31));
    assert_eq!(java_decode("#1F"), Some(31));
    assert_eq!(java_decode("-0x10"), Some(-16));
    assert_eq!(java_decode("017"), Some(15));
    assert_eq!(java_decode("0"), Some(0));
    for bad in ["", "-", "0x", "08", "1e3", "0x-1", "--1", " 1", "1M"] {
        assert_eq!(java_decode(bad), None, "{bad:?}");
    }
    assert_eq!(java_trim("\t x \u{1} "), "x");
}
