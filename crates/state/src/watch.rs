//! Watches: who is told of which change. Not replicated: each server keeps the watches of its
//! own connections and feeds this registry the [`Trigger`]s that every applied transaction
//! yields, in apply order (ZooKeeper's `WatchManager`, one per data and child kind).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use warden_proto::types::{keeper_state, watcher_type};
use warden_proto::{EventType, WatcherEvent};

use crate::path;
use crate::tree::DataTree;
use crate::txn::Trigger;

/// The kinds of watch a session can leave on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WatchKind {
    /// One-shot, from getData or exists: creation, data change, deletion.
    Data,
    /// One-shot, from getChildren: children changed, or the node deleted.
    Child,
    /// addWatch PERSISTENT: every change of the node and of its list of children.
    Persistent,
    /// addWatch PERSISTENT_RECURSIVE: creation, data change and deletion of the node and of
    /// every node below it; never NodeChildrenChanged.
    PersistentRecursive,
}

const KINDS: [WatchKind; 4] = [
    WatchKind::Data,
    WatchKind::Child,
    WatchKind::Persistent,
    WatchKind::PersistentRecursive,
];

fn kind_index(kind: WatchKind) -> usize {
    kind as usize
}

/// A watch event for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub session_id: i64,
    pub event: WatcherEvent,
}

fn event(event_type: EventType, path: &str) -> WatcherEvent {
    WatcherEvent {
        event_type: event_type as i32,
        state: keeper_state::SYNC_CONNECTED,
        path: path.to_owned(),
    }
}

/// Every watch of this server's sessions.
#[derive(Debug, Default, Clone)]
pub struct WatchRegistry {
    /// For each kind, path -> sessions watching it.
    by_path: [BTreeMap<Arc<str>, BTreeSet<i64>>; 4],
    /// Session -> its (kind, path) watches, to drop them all when it ends. The path is the
    /// key's own in `by_path`, shared: a copy of it in each watch was most of a watch's bytes.
    by_session: BTreeMap<i64, BTreeSet<(WatchKind, Arc<str>)>>,
    count: usize,
}

impl WatchRegistry {
    /// Number of (session, kind, path) watches held.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn add(&mut self, session_id: i64, path: &str, kind: WatchKind) {
        let map = &mut self.by_path[kind_index(kind)];
        let key = match map.get_key_value(path) {
            Some((key, _)) => key.clone(),
            None => Arc::from(path),
        };
        if map.entry(key.clone()).or_default().insert(session_id) {
            self.by_session
                .entry(session_id)
                .or_default()
                .insert((kind, key));
            self.count += 1;
        }
    }

    fn remove_one(&mut self, session_id: i64, path: &str, kind: WatchKind) -> bool {
        let map = &mut self.by_path[kind_index(kind)];
        let Some((key, set)) = map.get_key_value(path) else {
            return false;
        };
        if !set.contains(&session_id) {
            return false;
        }
        let key = key.clone();
        let set = map.get_mut(path).expect("found above");
        set.remove(&session_id);
        if set.is_empty() {
            map.remove(path);
        }
        if let Some(mine) = self.by_session.get_mut(&session_id) {
            mine.remove(&(kind, key));
            if mine.is_empty() {
                self.by_session.remove(&session_id);
            }
        }
        self.count -= 1;
        true
    }

    /// Number of watches `session_id` holds, of every kind.
    pub fn count_of(&self, session_id: i64) -> usize {
        self.by_session.get(&session_id).map_or(0, BTreeSet::len)
    }

    /// Whether `session_id` holds a watch of `kind` on `path`.
    pub fn has(&self, session_id: i64, path: &str, kind: WatchKind) -> bool {
        self.by_path[kind_index(kind)]
            .get(path)
            .is_some_and(|s| s.contains(&session_id))
    }

    fn kinds_of(watcher_type: i32) -> &'static [WatchKind] {
        match watcher_type {
            watcher_type::CHILDREN => &[WatchKind::Child],
            watcher_type::DATA => &[WatchKind::Data],
            watcher_type::PERSISTENT => &[WatchKind::Persistent],
            watcher_type::PERSISTENT_RECURSIVE => &[WatchKind::PersistentRecursive],
            watcher_type::ANY => &KINDS,
            _ => &[],
        }
    }

    /// checkWatches: whether the session holds a watch of `watcher_type` on `path`.
    pub fn contains(&self, session_id: i64, path: &str, watcher_type: i32) -> bool {
        Self::kinds_of(watcher_type)
            .iter()
            .any(|&k| self.has(session_id, path, k))
    }

    /// removeWatches: drops the session's watches of `watcher_type` on `path`; false (the
    /// client gets NoWatcher) if it held none.
    pub fn remove(&mut self, session_id: i64, path: &str, watcher_type: i32) -> bool {
        let mut removed = false;
        for &k in Self::kinds_of(watcher_type) {
            removed |= self.remove_one(session_id, path, k);
        }
        removed
    }

    /// Drops every watch of a session that ended.
    pub fn remove_session(&mut self, session_id: i64) {
        for (kind, path) in self.by_session.remove(&session_id).unwrap_or_default() {
            let map = &mut self.by_path[kind_index(kind)];
            if let Some(set) = map.get_mut(&*path) {
                set.remove(&session_id);
                if set.is_empty() {
                    map.remove(&*path);
                }
            }
            self.count -= 1;
        }
    }

    /// The sessions watching `path` with `kind`; one-shot watches are consumed.
    fn take(&mut self, path: &str, kind: WatchKind, into: &mut BTreeSet<i64>) {
        let sessions: Vec<i64> = self.by_path[kind_index(kind)]
            .get(path)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        for s in sessions {
            into.insert(s);
            if matches!(kind, WatchKind::Data | WatchKind::Child) {
                self.remove_one(s, path, kind);
            }
        }
    }

    /// The events one change sends: each watching session is told once.
    pub fn fire(&mut self, trigger: &Trigger) -> Vec<Delivery> {
        let path = trigger.path.as_str();
        let mut sessions = BTreeSet::new();
        match trigger.event {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                self.take(path, WatchKind::Data, &mut sessions);
            }
            EventType::NodeDeleted => {
                self.take(path, WatchKind::Data, &mut sessions);
                self.take(path, WatchKind::Child, &mut sessions);
            }
            EventType::NodeChildrenChanged => {
                self.take(path, WatchKind::Child, &mut sessions);
            }
            _ => return Vec::new(),
        }
        self.take(path, WatchKind::Persistent, &mut sessions);
        if trigger.event != EventType::NodeChildrenChanged
            && !self.by_path[kind_index(WatchKind::PersistentRecursive)].is_empty()
        {
            let mut at = Some(path);
            while let Some(p) = at {
                self.take(p, WatchKind::PersistentRecursive, &mut sessions);
                at = path::split_parent(p)
                    .map(|(parent, _)| parent)
                    .filter(|_| p != "/");
            }
        }
        sessions
            .into_iter()
            .map(|session_id| Delivery {
                session_id,
                event: event(trigger.event, path),
            })
            .collect()
    }

    /// setWatches after a reconnect (`DataTree.setWatches`): for each watch the client held,
    /// either the event it missed since `relative_zxid` or the watch re-armed.
    #[allow(clippy::too_many_arguments)]
    pub fn set_watches(
        &mut self,
        tree: &DataTree,
        session_id: i64,
        relative_zxid: i64,
        data: &[String],
        exist: &[String],
        child: &[String],
        persistent: &[String],
        recursive: &[String],
    ) -> Vec<WatcherEvent> {
        let mut missed = Vec::new();
        for p in data {
            match tree.get(p) {
                None => missed.push(event(EventType::NodeDeleted, p)),
                Some(n) if n.stat().mzxid > relative_zxid => {
                    missed.push(event(EventType::NodeDataChanged, p))
                }
                Some(_) => self.add(session_id, p, WatchKind::Data),
            }
        }
        for p in exist {
            match tree.get(p) {
                Some(_) => missed.push(event(EventType::NodeCreated, p)),
                None => self.add(session_id, p, WatchKind::Data),
            }
        }
        for p in child {
            match tree.get(p) {
                None => missed.push(event(EventType::NodeDeleted, p)),
                Some(n) if n.stat().pzxid > relative_zxid => {
                    missed.push(event(EventType::NodeChildrenChanged, p))
                }
                Some(_) => self.add(session_id, p, WatchKind::Child),
            }
        }
        for p in persistent {
            self.add(session_id, p, WatchKind::Persistent);
        }
        for p in recursive {
            self.add(session_id, p, WatchKind::PersistentRecursive);
        }
        missed
    }

    /// Paths with watches, and the sessions on each (for `wchp`).
    pub fn by_path(&self) -> BTreeMap<&str, BTreeSet<i64>> {
        let mut out: BTreeMap<&str, BTreeSet<i64>> = BTreeMap::new();
        for map in &self.by_path {
            for (p, sessions) in map {
                out.entry(&**p).or_default().extend(sessions);
            }
        }
        out
    }

    /// Sessions with watches, and their paths (for `wchc`).
    pub fn by_session(&self) -> BTreeMap<i64, BTreeSet<&str>> {
        self.by_session
            .iter()
            .map(|(s, w)| (*s, w.iter().map(|(_, p)| &**p).collect()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trig(event: EventType, path: &str) -> Trigger {
        Trigger {
            event,
            path: path.to_owned(),
            acl: Vec::new().into(),
        }
    }

    fn sessions(d: &[Delivery]) -> Vec<i64> {
        d.iter().map(|d| d.session_id).collect()
    }

    /// Programmer's Guide, "ZooKeeper Watches": "One-time trigger: One watch event will be sent
    /// to the client when the data has changed."
    #[test]
    fn one_shot_watches_fire_once() {
        let mut w = WatchRegistry::default();
        w.add(1, "/a", WatchKind::Data);
        assert_eq!(
            sessions(&w.fire(&trig(EventType::NodeDataChanged, "/a"))),
            [1]
        );
        assert!(w.fire(&trig(EventType::NodeDataChanged, "/a")).is_empty());
        assert!(w.is_empty());
    }

    /// "Created event: Enabled with a call to exists." "Deleted event: Enabled with a call to
    /// exists, getData, and getChildren." "Child event: Enabled with a call to getChildren."
    #[test]
    fn which_watch_sees_which_event() {
        let mut w = WatchRegistry::default();
        w.add(1, "/a", WatchKind::Data);
        w.add(2, "/a", WatchKind::Child);
        assert!(w.fire(&trig(EventType::NodeCreated, "/b")).is_empty());
        assert_eq!(
            sessions(&w.fire(&trig(EventType::NodeChildrenChanged, "/a"))),
            [2]
        );
        w.add(2, "/a", WatchKind::Child);
        assert_eq!(
            sessions(&w.fire(&trig(EventType::NodeDeleted, "/a"))),
            [1, 2]
        );
    }

    /// "a client will see a watch event for a znode it is watching only once per change
    /// notification": a session with both a data and a child watch gets one NodeDeleted.
    #[test]
    fn one_event_per_session_per_change() {
        let mut w = WatchRegistry::default();
        w.add(1, "/a", WatchKind::Data);
        w.add(1, "/a", WatchKind::Child);
        w.add(1, "/a", WatchKind::Persistent);
        assert_eq!(w.fire(&trig(EventType::NodeDeleted, "/a")).len(), 1);
        assert_eq!(w.len(), 1, "the persistent watch stays");
    }

    /// "Persistent, Recursive Watches ... triggered for changes to the registered znode as
    /// well as any children znodes recursively" and "NodeChildrenChanged events are not
    /// triggered for persistent recursive watches".
    #[test]
    fn persistent_recursive_watches() {
        let mut w = WatchRegistry::default();
        w.add(1, "/a", WatchKind::PersistentRecursive);
        w.add(2, "/", WatchKind::PersistentRecursive);
        assert_eq!(
            sessions(&w.fire(&trig(EventType::NodeCreated, "/a/b/c"))),
            [1, 2]
        );
        assert!(
            w.fire(&trig(EventType::NodeChildrenChanged, "/a"))
                .is_empty()
        );
        assert_eq!(
            sessions(&w.fire(&trig(EventType::NodeDataChanged, "/x"))),
            [2]
        );
        assert_eq!(w.len(), 2);
    }

    #[test]
    fn persistent_watch_sees_its_node_and_children_list() {
        let mut w = WatchRegistry::default();
        w.add(1, "/a", WatchKind::Persistent);
        assert_eq!(w.fire(&trig(EventType::NodeChildrenChanged, "/a")).len(), 1);
        assert_eq!(w.fire(&trig(EventType::NodeDataChanged, "/a")).len(), 1);
        assert!(w.fire(&trig(EventType::NodeCreated, "/a/b")).is_empty());
    }

    #[test]
    fn remove_and_check_by_watcher_type() {
        let mut w = WatchRegistry::default();
        w.add(1, "/a", WatchKind::Data);
        w.add(1, "/a", WatchKind::Child);
        assert!(w.contains(1, "/a", watcher_type::DATA));
        assert!(!w.contains(2, "/a", watcher_type::ANY));
        assert!(w.remove(1, "/a", watcher_type::CHILDREN));
        assert!(!w.remove(1, "/a", watcher_type::CHILDREN));
        assert!(w.remove(1, "/a", watcher_type::ANY));
        assert!(w.is_empty());
        w.add(3, "/x", WatchKind::Data);
        w.remove_session(3);
        assert!(w.is_empty());
    }
}
