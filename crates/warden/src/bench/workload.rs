//! Workloads: which requests a session sends, in what proportions, on which znodes.
//!
//! A workload is a TOML document. The named workloads are TOML files compiled into the binary
//! (`src/bench/workloads/*.toml`), so a workload of one's own takes the same shape. Every znode a
//! workload touches lies under the bench root (`/warden-bench` by default):
//!
//! ```text
//! shared/p{i}/c{j}        made in setup; read, set, checked and watched by every session
//! s{session}/b{k}/n{seq}  a session's own znodes: the only ones it creates and deletes
//! load/p{k}/n{i}          the znodes of a [load] workload
//! ```
//!
//! Because a session deletes only znodes it has seen created, and shared znodes are never
//! deleted, a well-formed workload runs without a single error code from a correct server.

use std::path::Path;

use anyhow::{Context, bail, ensure};
use serde::Deserialize;

use super::stats::OpKind;

/// The largest value a workload may write: 64 MiB. Servers refuse larger packets than they
/// are set to take: ZooKeeper above jute.maxbuffer (1 MiB - 1 by default, raised with
/// `-Djute.maxbuffer`), Warden above `limits.frame_bytes_max` (16 MiB by default).
pub const VALUE_BYTES_MAX: u32 = 64 << 20;
pub const MULTI_OPS_MAX: u32 = 1_000;
pub const SHARED_NODES_MAX: u64 = 10_000_000;
pub const LOAD_NODES_MAX: u64 = 100_000_000;
pub const LOAD_PARENTS_MAX: u32 = 1_000_000;
pub const DELETE_STOCK_MAX: u32 = 1_000_000;
pub const OPS_MAX: usize = 64;
pub const PIPELINE_MAX: u32 = 10_000;
const WORKLOAD_FILE_BYTES_MAX: u64 = 1 << 20;
/// Value size of creates and sets that do not say one.
const VALUE_BYTES_DEFAULT: u32 = 100;

/// The workloads that have a name, in the order `--help` lists them.
pub const NAMED: [(&str, &str); 5] = [
    ("create", include_str!("workloads/create.toml")),
    ("mixed", include_str!("workloads/mixed.toml")),
    ("clickhouse", include_str!("workloads/clickhouse.toml")),
    ("read", include_str!("workloads/read.toml")),
    ("load", include_str!("workloads/load.toml")),
];

/// A validated workload.
#[derive(Debug)]
pub struct Workload {
    pub name: String,
    pub description: String,
    /// Requests each session keeps outstanding unless `--pipeline` says otherwise.
    pub pipeline: u32,
    /// Own znodes made for each session in setup, so that its first deletes have something to
    /// delete.
    pub delete_stock: u32,
    pub shared: Option<SharedTree>,
    pub plan: Plan,
}

impl Workload {
    /// The most value bytes one request of this workload carries, either way: what a create,
    /// set or multi sends, or what a get of a shared child brings back.
    pub fn request_bytes_max(&self) -> u64 {
        let shared = self.shared.map_or(0, |s| u64::from(s.value.max));
        match &self.plan {
            Plan::Load(load) => u64::from(load.value.max),
            Plan::Mix(ops) => ops
                .iter()
                .map(|op| match op {
                    Op::Create { value } | Op::Set { value, .. } => u64::from(value.max),
                    Op::Multi { size, value, .. } => u64::from(size.max) * u64::from(value.max),
                    Op::Get { .. } => shared,
                    Op::Delete | Op::Exists { .. } | Op::List { .. } => 0,
                })
                .max()
                .unwrap_or(0),
        }
    }
}

#[derive(Debug)]
pub enum Plan {
    /// Requests drawn at random by weight until the run's duration or request count is spent.
    Mix(Weighted<Op>),
    /// A fixed set of creates, each sent once.
    Load(Load),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedTree {
    pub parents: u32,
    pub children: u32,
    pub value: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Load {
    pub nodes: u64,
    pub parents: u32,
    pub value: Span,
}

/// An inclusive range of sizes, drawn uniformly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub min: u32,
    pub max: u32,
}

impl Span {
    pub const fn exactly(n: u32) -> Span {
        Span { min: n, max: n }
    }

    pub fn pick(&self, rng: &mut fastrand::Rng) -> u32 {
        rng.u32(self.min..=self.max)
    }
}

/// Which znode a read, set or check addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A random `shared/p{i}/c{j}`.
    SharedChild,
    /// A random `shared/p{i}`.
    SharedParent,
    /// One of the session's own znodes (for `list`, the folder it is creating into); a shared
    /// child while it has none.
    Own,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Create {
        value: Span,
    },
    Delete,
    Set {
        target: Target,
        value: Span,
    },
    Get {
        target: Target,
        watch: f64,
    },
    Exists {
        target: Target,
        watch: f64,
    },
    List {
        target: Target,
        watch: f64,
    },
    Multi {
        size: Span,
        mix: Weighted<MultiPart>,
        value: Span,
    },
}

/// One operation inside a multi transaction. Creates and deletes address the session's own
/// znodes; sets and checks (version -1, so they always pass) address shared children.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MultiPart {
    Create,
    Delete,
    Set,
    Check,
}

/// Items with integer weights, drawn in proportion to their weight.
#[derive(Clone, Debug, PartialEq)]
pub struct Weighted<T> {
    items: Vec<T>,
    /// Running sums of the weights; `cumulative[i]` is the total weight of items `0..=i`.
    cumulative: Vec<u64>,
}

impl<T> Weighted<T> {
    /// Items with weight 0 are dropped; `None` when nothing has a positive weight.
    pub fn new(weighted: impl IntoIterator<Item = (u32, T)>) -> Option<Weighted<T>> {
        let mut items = Vec::new();
        let mut cumulative = Vec::new();
        let mut total = 0u64;
        for (weight, item) in weighted {
            if weight > 0 {
                total += u64::from(weight);
                items.push(item);
                cumulative.push(total);
            }
        }
        (!items.is_empty()).then_some(Weighted { items, cumulative })
    }

    pub fn pick(&self, rng: &mut fastrand::Rng) -> &T {
        let total = *self.cumulative.last().expect("a Weighted is never empty");
        let r = rng.u64(0..total);
        let i = self.cumulative.partition_point(|&c| c <= r);
        &self.items[i]
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.items.iter_mut()
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    /// Each item with its own weight.
    #[cfg(test)]
    fn weights(&self) -> impl Iterator<Item = (u64, &T)> {
        let previous = std::iter::once(0).chain(self.cumulative.iter().copied());
        self.cumulative
            .iter()
            .zip(previous)
            .map(|(c, p)| c - p)
            .zip(&self.items)
    }
}

#[cfg(test)]
impl Op {
    /// The row of the report this op's requests are counted in.
    fn kind(&self) -> OpKind {
        match self {
            Op::Create { .. } => OpKind::Create,
            Op::Delete => OpKind::Delete,
            Op::Set { .. } => OpKind::Set,
            Op::Get { .. } => OpKind::Get,
            Op::Exists { .. } => OpKind::Exists,
            Op::List { .. } => OpKind::List,
            Op::Multi { .. } => OpKind::Multi,
        }
    }
}

impl Workload {
    /// A named workload, or else a TOML file at that path.
    pub fn resolve(name_or_path: &str) -> anyhow::Result<Workload> {
        if let Some((name, text)) = NAMED.iter().find(|(name, _)| *name == name_or_path) {
            return Workload::parse(name, text);
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            let names: Vec<&str> = NAMED.iter().map(|(name, _)| *name).collect();
            bail!(
                "no workload named {name_or_path:?} and no such file (named workloads: {})",
                names.join(", ")
            );
        }
        let bytes = std::fs::metadata(path)
            .with_context(|| format!("reading {}", path.display()))?
            .len();
        ensure!(
            bytes <= WORKLOAD_FILE_BYTES_MAX,
            "{}: {bytes} bytes, more than a workload file may have ({WORKLOAD_FILE_BYTES_MAX})",
            path.display()
        );
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let stem = path.file_stem().map_or_else(
            || name_or_path.to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        Workload::parse(&stem, &text).with_context(|| format!("workload file {}", path.display()))
    }

    /// Parses and validates a workload; `default_name` is used when the document names none.
    pub fn parse(default_name: &str, text: &str) -> anyhow::Result<Workload> {
        let file: WorkloadFile = toml::from_str(text)?;
        file.validate(default_name)
    }

    /// Whether sessions must remember their own znodes (to delete them or read them back).
    pub fn tracks_own_nodes(&self) -> bool {
        let Plan::Mix(ops) = &self.plan else {
            return false;
        };
        ops.iter().any(|op| match op {
            Op::Delete => true,
            Op::Get { target, .. }
            | Op::Exists { target, .. }
            | Op::List { target, .. }
            | Op::Set { target, .. } => *target == Target::Own,
            Op::Multi { mix, .. } => mix.iter().any(|part| *part == MultiPart::Delete),
            Op::Create { .. } => false,
        })
    }

    /// Resizes a [load] workload (`--nodes`, `--parents`).
    pub fn resize_load(&mut self, nodes: Option<u64>, parents: Option<u32>) -> anyhow::Result<()> {
        if nodes.is_none() && parents.is_none() {
            return Ok(());
        }
        let Plan::Load(load) = &mut self.plan else {
            bail!(
                "--nodes and --parents apply only to a workload with a [load] section, not to {:?}",
                self.name
            );
        };
        load.nodes = nodes.unwrap_or(load.nodes);
        load.parents = parents.unwrap_or(load.parents);
        validate_load(load)
    }

    /// Gives every value the workload writes the size `bytes` (`--value-bytes`): its load,
    /// its shared tree, and each create, set and multi.
    pub fn resize_values(&mut self, bytes: Option<u32>) -> anyhow::Result<()> {
        let Some(bytes) = bytes else {
            return Ok(());
        };
        ensure!(
            bytes <= VALUE_BYTES_MAX,
            "--value-bytes {bytes} is above {VALUE_BYTES_MAX}"
        );
        let size = Span::exactly(bytes);
        if let Some(shared) = &mut self.shared {
            shared.value = size;
        }
        match &mut self.plan {
            Plan::Load(load) => load.value = size,
            Plan::Mix(ops) => {
                for op in ops.iter_mut() {
                    match op {
                        Op::Create { value } | Op::Set { value, .. } | Op::Multi { value, .. } => {
                            *value = size
                        }
                        Op::Delete | Op::Get { .. } | Op::Exists { .. } | Op::List { .. } => {}
                    }
                }
            }
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    name: Option<String>,
    #[serde(default)]
    description: String,
    pipeline: Option<u32>,
    delete_stock: Option<u32>,
    shared: Option<SharedFile>,
    load: Option<LoadFile>,
    #[serde(default)]
    op: Vec<OpFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SharedFile {
    parents: u32,
    children: u32,
    value_bytes: Option<SpanFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadFile {
    nodes: u64,
    parents: u32,
    value_bytes: Option<SpanFile>,
}

/// `100` or `{ min = 10, max = 200 }`.
#[derive(Deserialize)]
#[serde(untagged)]
enum SpanFile {
    Exactly(u32),
    Range(RangeFile),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeFile {
    min: u32,
    max: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpFile {
    kind: OpKind,
    weight: u32,
    target: Option<TargetFile>,
    value_bytes: Option<SpanFile>,
    watch_probability: Option<f64>,
    size: Option<SpanFile>,
    mix: Option<MixFile>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum TargetFile {
    SharedChild,
    SharedParent,
    Own,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MixFile {
    #[serde(default)]
    create: u32,
    #[serde(default)]
    delete: u32,
    #[serde(default)]
    set: u32,
    #[serde(default)]
    check: u32,
}

impl WorkloadFile {
    fn validate(self, default_name: &str) -> anyhow::Result<Workload> {
        let shared = self.shared.map(SharedFile::validate).transpose()?;
        let plan = match (self.load, self.op.is_empty()) {
            (Some(_), false) => {
                bail!("a workload has either a [load] section or [[op]] entries, not both")
            }
            (None, true) => bail!("a workload needs [[op]] entries or a [load] section"),
            (Some(load), true) => {
                ensure!(shared.is_none(), "a [load] workload has no [shared] tree");
                let load = Load {
                    nodes: load.nodes,
                    parents: load.parents,
                    value: value_span(load.value_bytes)?,
                };
                validate_load(&load)?;
                Plan::Load(load)
            }
            (None, false) => {
                ensure!(
                    self.op.len() <= OPS_MAX,
                    "{} [[op]] entries, more than {OPS_MAX}",
                    self.op.len()
                );
                let mut ops = Vec::with_capacity(self.op.len());
                for (i, op) in self.op.into_iter().enumerate() {
                    let weight = op.weight;
                    let name = op.kind.name();
                    let op = op
                        .validate(shared.as_ref())
                        .with_context(|| format!("[[op]] #{} ({name})", i + 1))?;
                    ops.push((weight, op));
                }
                Plan::Mix(Weighted::new(ops).context("every [[op]] has weight 0")?)
            }
        };
        let pipeline = self.pipeline.unwrap_or(1);
        validate_pipeline(pipeline)?;
        let mut workload = Workload {
            name: self.name.unwrap_or_else(|| default_name.to_string()),
            description: self.description,
            pipeline,
            delete_stock: 0,
            shared,
            plan,
        };
        let delete_stock = self.delete_stock.unwrap_or(0);
        ensure!(
            delete_stock <= DELETE_STOCK_MAX,
            "delete_stock {delete_stock} is more than {DELETE_STOCK_MAX}"
        );
        ensure!(
            delete_stock == 0 || workload.tracks_own_nodes(),
            "delete_stock is set but no operation deletes or reads the session's own znodes"
        );
        workload.delete_stock = delete_stock;
        Ok(workload)
    }
}

pub fn validate_pipeline(pipeline: u32) -> anyhow::Result<()> {
    ensure!(
        (1..=PIPELINE_MAX).contains(&pipeline),
        "pipeline must be within 1..={PIPELINE_MAX}, not {pipeline}"
    );
    Ok(())
}

fn validate_load(load: &Load) -> anyhow::Result<()> {
    ensure!(
        (1..=LOAD_NODES_MAX).contains(&load.nodes),
        "load nodes must be within 1..={LOAD_NODES_MAX}"
    );
    ensure!(
        (1..=LOAD_PARENTS_MAX).contains(&load.parents),
        "load parents must be within 1..={LOAD_PARENTS_MAX}"
    );
    Ok(())
}

impl SharedFile {
    fn validate(self) -> anyhow::Result<SharedTree> {
        ensure!(self.parents >= 1, "[shared] needs at least one parent");
        let nodes = u64::from(self.parents) * (1 + u64::from(self.children));
        ensure!(
            nodes <= SHARED_NODES_MAX,
            "[shared] has {nodes} znodes, more than {SHARED_NODES_MAX}"
        );
        Ok(SharedTree {
            parents: self.parents,
            children: self.children,
            value: value_span(self.value_bytes)?,
        })
    }
}

impl OpFile {
    fn validate(self, shared: Option<&SharedTree>) -> anyhow::Result<Op> {
        use OpKind as K;
        let kind = self.kind;
        let allowed: &[&str] = match kind {
            K::Create => &["value_bytes"],
            K::Delete => &[],
            K::Set => &["target", "value_bytes"],
            K::Get | K::Exists | K::List => &["target", "watch_probability"],
            K::Multi => &["size", "mix", "value_bytes"],
        };
        let given = [
            ("target", self.target.is_some()),
            ("value_bytes", self.value_bytes.is_some()),
            ("watch_probability", self.watch_probability.is_some()),
            ("size", self.size.is_some()),
            ("mix", self.mix.is_some()),
        ];
        for (field, present) in given {
            ensure!(
                !present || allowed.contains(&field),
                "`{field}` does not apply to {}",
                kind.name()
            );
        }
        let watch = self.watch_probability.unwrap_or(0.0);
        ensure!(
            (0.0..=1.0).contains(&watch),
            "watch_probability must be within 0..=1, not {watch}"
        );
        let default_target = if matches!(kind, K::List) {
            Target::SharedParent
        } else {
            Target::SharedChild
        };
        let target = self.target.map_or(default_target, TargetFile::target);
        let value = value_span(self.value_bytes)?;
        let op = match kind {
            K::Create => Op::Create { value },
            K::Delete => Op::Delete,
            K::Set => Op::Set { target, value },
            K::Get => Op::Get { target, watch },
            K::Exists => Op::Exists { target, watch },
            K::List => Op::List { target, watch },
            K::Multi => {
                let size = span(self.size.context("multi needs `size`")?)?;
                ensure!(
                    size.min >= 1 && size.max <= MULTI_OPS_MAX,
                    "multi size must be within 1..={MULTI_OPS_MAX}"
                );
                let mix = self
                    .mix
                    .context("multi needs `mix`, e.g. { create = 2, delete = 1 }")?;
                let mix = Weighted::new([
                    (mix.create, MultiPart::Create),
                    (mix.delete, MultiPart::Delete),
                    (mix.set, MultiPart::Set),
                    (mix.check, MultiPart::Check),
                ])
                .context("multi `mix` has no part with a positive weight")?;
                Op::Multi { size, mix, value }
            }
        };
        check_shared_exists(&op, shared)?;
        Ok(op)
    }
}

/// An op that addresses shared znodes needs a [shared] tree that has them.
fn check_shared_exists(op: &Op, shared: Option<&SharedTree>) -> anyhow::Result<()> {
    let (needs_parent, needs_child) = match op {
        Op::Get { target, .. }
        | Op::Exists { target, .. }
        | Op::List { target, .. }
        | Op::Set { target, .. } => {
            // An own target falls back to a shared child while the session has no znode of its own.
            (
                *target == Target::SharedParent,
                matches!(target, Target::SharedChild | Target::Own),
            )
        }
        Op::Multi { mix, .. } => (
            false,
            mix.iter()
                .any(|part| matches!(part, MultiPart::Set | MultiPart::Check)),
        ),
        Op::Create { .. } | Op::Delete => (false, false),
    };
    let has_children = shared.is_some_and(|tree| tree.children > 0);
    ensure!(
        !needs_parent || shared.is_some(),
        "addresses shared parents but the workload has no [shared] tree"
    );
    ensure!(
        !needs_child || has_children,
        "addresses shared children but the [shared] tree has none"
    );
    Ok(())
}

impl TargetFile {
    fn target(self) -> Target {
        match self {
            TargetFile::SharedChild => Target::SharedChild,
            TargetFile::SharedParent => Target::SharedParent,
            TargetFile::Own => Target::Own,
        }
    }
}

fn span(file: SpanFile) -> anyhow::Result<Span> {
    let span = match file {
        SpanFile::Exactly(n) => Span::exactly(n),
        SpanFile::Range(RangeFile { min, max }) => Span { min, max },
    };
    ensure!(
        span.min <= span.max,
        "min {} is above max {}",
        span.min,
        span.max
    );
    Ok(span)
}

fn value_span(file: Option<SpanFile>) -> anyhow::Result<Span> {
    let value = file.map_or(Ok(Span::exactly(VALUE_BYTES_DEFAULT)), span)?;
    ensure!(
        value.max <= VALUE_BYTES_MAX,
        "value_bytes {} is above {VALUE_BYTES_MAX}",
        value.max
    );
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Workload> {
        Workload::parse("test", text)
    }

    fn error_of(text: &str) -> String {
        format!(
            "{:#}",
            parse(text).expect_err("the workload should be refused")
        )
    }

    fn ops(workload: &Workload) -> Vec<Op> {
        let Plan::Mix(ops) = &workload.plan else {
            panic!("not a mix")
        };
        ops.iter().cloned().collect()
    }

    #[test]
    fn every_named_workload_is_valid() {
        for (name, _) in NAMED {
            let workload = Workload::resolve(name).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_eq!(workload.name, name);
            assert!(
                !workload.description.is_empty(),
                "{name} has no description"
            );
        }
    }

    #[test]
    fn mixed_is_raftkeepers_mix() {
        let workload = Workload::resolve("mixed").unwrap();
        let Plan::Mix(ops) = &workload.plan else {
            panic!("mixed is not a mix")
        };
        let by_kind: Vec<(OpKind, u64)> = ops
            .weights()
            .map(|(weight, op)| (op.kind(), weight))
            .collect();
        let expect = [
            (OpKind::Create, 1),
            (OpKind::Set, 8),
            (OpKind::Get, 45),
            (OpKind::List, 45),
            (OpKind::Delete, 1),
        ];
        assert_eq!(by_kind, expect);
        assert_eq!(
            workload.shared,
            Some(SharedTree {
                parents: 10,
                children: 100,
                value: Span::exactly(50)
            })
        );
    }

    #[test]
    fn clickhouse_is_a_third_writes() {
        let workload = Workload::resolve("clickhouse").unwrap();
        let Plan::Mix(ops) = &workload.plan else {
            panic!("clickhouse is not a mix")
        };
        let total: u64 = ops.weights().map(|(weight, _)| weight).sum();
        let writes: u64 = ops
            .weights()
            .filter(|(_, op)| {
                matches!(
                    op.kind(),
                    OpKind::Multi | OpKind::Set | OpKind::Create | OpKind::Delete
                )
            })
            .map(|(weight, _)| weight)
            .sum();
        assert_eq!((writes, total), (33, 100));
        assert!(workload.tracks_own_nodes());
    }

    #[test]
    fn load_is_a_million_nodes_and_resizes() {
        let mut workload = Workload::resolve("load").unwrap();
        assert_eq!(workload.pipeline, 64);
        let Plan::Load(load) = workload.plan else {
            panic!("load is not a load")
        };
        assert_eq!(
            load,
            Load {
                nodes: 1_000_000,
                parents: 1000,
                value: Span::exactly(100)
            }
        );
        workload.resize_load(Some(5000), None).unwrap();
        let Plan::Load(load) = workload.plan else {
            unreachable!()
        };
        assert_eq!((load.nodes, load.parents), (5000, 1000));
        assert!(workload.resize_load(Some(0), None).is_err());
        let mut mixed = Workload::resolve("mixed").unwrap();
        assert!(mixed.resize_load(Some(10), None).is_err());
        mixed.resize_load(None, None).unwrap();
    }

    #[test]
    fn value_bytes_resizes_every_value_written() {
        let mut load = Workload::resolve("load").unwrap();
        load.resize_values(Some(10 << 20)).unwrap();
        assert_eq!(load.request_bytes_max(), 10 << 20);
        let mut clickhouse = Workload::resolve("clickhouse").unwrap();
        let before = clickhouse.request_bytes_max();
        clickhouse.resize_values(None).unwrap();
        assert_eq!(clickhouse.request_bytes_max(), before);
        clickhouse.resize_values(Some(1000)).unwrap();
        // A multi of up to 11 operations, each with a value of 1,000 bytes.
        assert_eq!(clickhouse.request_bytes_max(), 11_000);
        assert_eq!(clickhouse.shared.unwrap().value, Span::exactly(1000));
        assert!(clickhouse.resize_values(Some(VALUE_BYTES_MAX + 1)).is_err());
    }

    #[test]
    fn a_workload_file_reads_weights_sizes_targets_and_multi() {
        let workload = parse(
            r#"
            name = "mine"
            pipeline = 4
            delete_stock = 10
            [shared]
            parents = 2
            children = 3
            value_bytes = { min = 1, max = 9 }
            [[op]]
            kind = "multi"
            weight = 3
            size = { min = 2, max = 5 }
            mix = { create = 1, delete = 1 }
            value_bytes = 7
            [[op]]
            kind = "exists"
            weight = 1
            target = "own"
            watch_probability = 0.25
            "#,
        )
        .unwrap();
        assert_eq!(
            (
                workload.name.as_str(),
                workload.pipeline,
                workload.delete_stock
            ),
            ("mine", 4, 10)
        );
        assert_eq!(workload.shared.unwrap().value, Span { min: 1, max: 9 });
        let ops = ops(&workload);
        let Op::Multi { size, mix, value } = &ops[0] else {
            panic!("{ops:?}")
        };
        assert_eq!((*size, *value), (Span { min: 2, max: 5 }, Span::exactly(7)));
        assert_eq!(
            mix.iter().copied().collect::<Vec<_>>(),
            [MultiPart::Create, MultiPart::Delete]
        );
        assert_eq!(
            ops[1],
            Op::Exists {
                target: Target::Own,
                watch: 0.25
            }
        );
    }

    #[test]
    fn defaults_fill_what_a_file_leaves_out() {
        let workload = parse("[shared]\nparents = 1\nchildren = 1\n[[op]]\nkind = \"list\"\nweight = 1\n[[op]]\nkind = \"set\"\nweight = 1\n").unwrap();
        assert_eq!(workload.pipeline, 1);
        assert_eq!(workload.name, "test");
        assert_eq!(
            ops(&workload),
            [
                Op::List {
                    target: Target::SharedParent,
                    watch: 0.0
                },
                Op::Set {
                    target: Target::SharedChild,
                    value: Span::exactly(VALUE_BYTES_DEFAULT)
                }
            ]
        );
    }

    #[test]
    fn mistakes_get_errors_that_name_them() {
        let cases = [
            (
                "[[op]]\nkind = \"create\"\nweight = 1\nwatch_probability = 1.0\n",
                "`watch_probability` does not apply to create",
            ),
            (
                "[[op]]\nkind = \"create\"\nweight = 1\nvalue_byte = 1\n",
                "unknown field `value_byte`",
            ),
            (
                "[[op]]\nkind = \"rename\"\nweight = 1\n",
                "unknown variant `rename`",
            ),
            (
                "[[op]]\nkind = \"create\"\nweight = 0\n",
                "every [[op]] has weight 0",
            ),
            (
                "[[op]]\nkind = \"create\"\nweight = 1\nvalue_bytes = 100000000\n",
                "value_bytes 100000000 is above",
            ),
            (
                "[[op]]\nkind = \"create\"\nweight = 1\nvalue_bytes = { min = 5, max = 4 }\n",
                "min 5 is above max 4",
            ),
            (
                "[[op]]\nkind = \"get\"\nweight = 1\n",
                "[[op]] #1 (get): addresses shared children but",
            ),
            (
                "[[op]]\nkind = \"list\"\nweight = 1\n",
                "addresses shared parents but the workload has no [shared]",
            ),
            (
                "[[op]]\nkind = \"multi\"\nweight = 1\nmix = { create = 1 }\n",
                "multi needs `size`",
            ),
            (
                "[[op]]\nkind = \"multi\"\nweight = 1\nsize = 3\n",
                "multi needs `mix`",
            ),
            (
                "[[op]]\nkind = \"multi\"\nweight = 1\nsize = 0\nmix = { create = 1 }\n",
                "multi size must be within",
            ),
            (
                "[[op]]\nkind = \"multi\"\nweight = 1\nsize = 2\nmix = { set = 0 }\n",
                "no part with a positive weight",
            ),
            (
                "[load]\nnodes = 10\nparents = 1\n[[op]]\nkind = \"create\"\nweight = 1\n",
                "either a [load] section or [[op]]",
            ),
            (
                "[load]\nnodes = 0\nparents = 1\n",
                "load nodes must be within",
            ),
            (
                "description = \"nothing\"\n",
                "needs [[op]] entries or a [load] section",
            ),
            (
                "pipeline = 0\n[[op]]\nkind = \"create\"\nweight = 1\n",
                "pipeline must be within",
            ),
            (
                "delete_stock = 5\n[[op]]\nkind = \"create\"\nweight = 1\n",
                "delete_stock is set but",
            ),
            (
                "[shared]\nparents = 100000\nchildren = 1000\n[[op]]\nkind = \"list\"\nweight = 1\n",
                "more than 10000000",
            ),
        ];
        for (text, expected) in cases {
            let error = error_of(text);
            assert!(
                error.contains(expected),
                "for {text:?}: expected {expected:?} in {error:?}"
            );
        }
    }

    #[test]
    fn unknown_names_list_the_named_workloads() {
        let error = format!("{:#}", Workload::resolve("no-such-workload").unwrap_err());
        assert!(
            error.contains("create, mixed, clickhouse, read, load"),
            "{error}"
        );
    }

    #[test]
    fn weighted_draws_follow_the_weights() {
        let weighted = Weighted::new([(1, 'a'), (0, 'z'), (3, 'b'), (6, 'c')]).unwrap();
        let mut rng = fastrand::Rng::with_seed(7);
        let mut counts = [0u32; 3];
        let draws = 100_000;
        for _ in 0..draws {
            match weighted.pick(&mut rng) {
                'a' => counts[0] += 1,
                'b' => counts[1] += 1,
                'c' => counts[2] += 1,
                other => panic!("drew {other:?}, which has weight 0"),
            }
        }
        for (count, expected) in counts.iter().zip([0.1, 0.3, 0.6]) {
            let share = f64::from(*count) / f64::from(draws);
            assert!(
                (share - expected).abs() < 0.01,
                "share {share} for expected {expected}"
            );
        }
    }

    #[test]
    fn weighted_edges() {
        assert!(Weighted::<u8>::new([(0, 1), (0, 2)]).is_none());
        let one = Weighted::new([(u32::MAX, "only")]).unwrap();
        let mut rng = fastrand::Rng::with_seed(1);
        assert!((0..1000).all(|_| *one.pick(&mut rng) == "only"));
    }

    #[test]
    fn spans_draw_within_bounds() {
        let mut rng = fastrand::Rng::with_seed(3);
        let span = Span { min: 3, max: 11 };
        let draws: Vec<u32> = (0..10_000).map(|_| span.pick(&mut rng)).collect();
        assert_eq!(draws.iter().min(), Some(&3));
        assert_eq!(draws.iter().max(), Some(&11));
        assert_eq!(Span::exactly(5).pick(&mut rng), 5);
    }
}
