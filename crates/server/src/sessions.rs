//! The session tracker: when each live session expires unless its client is heard from.
//!
//! Every server keeps one, but only the leader's decides: the leader expires sessions whose
//! clients went silent, from the touches of its own connections and those the followers
//! report (as ZooKeeper's learners report their sessions in every ping). A new leader gives
//! every session a full timeout before it expires any, so no session dies of a silence it
//! could not help (its server was down, or the leader changed).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// How long a proposed close may stay unapplied before the session counts as live again and
/// may be proposed for expiry anew (the proposal was lost with a leader).
const CLOSE_RETRY: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub struct SessionTracker {
    deadlines: HashMap<i64, (Instant, Duration)>,
    /// Sessions whose closeSession is proposed and not yet applied, with when it was.
    closing: HashMap<i64, Instant>,
    /// Sessions touched by this server's clients since the last report to the leader.
    touched: HashSet<i64>,
    /// The server each session's client is connected to, as the leader of `owners_term`
    /// knows it: set when the session is created or resumed, checked for every write
    /// (ZooKeeper's session owner).
    owners: HashMap<i64, u64>,
    /// The term `owners` was learnt in. A leader keeps its record for itself (a follower
    /// never hears of a resume), so an earlier term's record is stale: a follower's, from the
    /// sessions it saw created, or a deposed leader's. A record from an earlier term is
    /// forgotten at the first word of a later one.
    owners_term: u64,
}

impl SessionTracker {
    /// A client of this server was heard from.
    pub fn touch(&mut self, session_id: i64, now: Instant) {
        self.touched.insert(session_id);
        if let Some((deadline, timeout)) = self.deadlines.get_mut(&session_id) {
            *deadline = now + *timeout;
        }
    }

    /// Server `from` reported to the leader of `term` that one of its clients was heard
    /// from. A new leader learns the owners of sessions it has not seen a write of this way.
    pub fn touch_reported(&mut self, session_id: i64, from: u64, now: Instant, term: u64) {
        if let Some((deadline, timeout)) = self.deadlines.get_mut(&session_id) {
            *deadline = now + *timeout;
            if let Some(owners) = self.owners_in(term) {
                owners.entry(session_id).or_insert(from);
            }
        }
    }

    /// The sessions touched here since the last call, for the report to the leader.
    pub fn take_touched(&mut self) -> Vec<i64> {
        self.touched.drain().collect()
    }

    /// A session exists (created, or found at start or on a new leader) with this timeout.
    pub fn set(&mut self, session_id: i64, timeout_ms: i32, now: Instant) {
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        self.deadlines.insert(session_id, (now + timeout, timeout));
    }

    pub fn remove(&mut self, session_id: i64) {
        self.deadlines.remove(&session_id);
        self.closing.remove(&session_id);
        self.touched.remove(&session_id);
        self.owners.remove(&session_id);
    }

    /// The session's client is now connected to `server` (it was created or resumed there),
    /// as known in `term`.
    pub fn claim(&mut self, session_id: i64, server: u64, term: u64) {
        if let Some(owners) = self.owners_in(term) {
            owners.insert(session_id, server);
        }
    }

    /// Whether a write of the session, for `term`, may come from `server`: it may if the
    /// session is attached there; a new leader, which knows no owners, takes the first server
    /// it hears from. A write from anywhere else is from a connection the client has left,
    /// and gets SessionMoved, so that it cannot overtake what the client did since on its new
    /// server. (A write for an earlier term is never entered in the log: it passes here.)
    pub fn owned_by(&mut self, session_id: i64, server: u64, term: u64) -> bool {
        self.owners_in(term)
            .is_none_or(|owners| *owners.entry(session_id).or_insert(server) == server)
    }

    /// The owners known in `term`: the record starts over in a later term than its own;
    /// `None` for an earlier term.
    fn owners_in(&mut self, term: u64) -> Option<&mut HashMap<i64, u64>> {
        if term > self.owners_term {
            self.owners.clear();
            self.owners_term = term;
        }
        (term == self.owners_term).then_some(&mut self.owners)
    }

    /// Whether a close of this session is on its way.
    pub fn is_closing(&self, session_id: i64) -> bool {
        self.closing.contains_key(&session_id)
    }

    /// Each tracked session and when it expires unless touched (for `dump`).
    pub fn deadlines(&self) -> impl Iterator<Item = (i64, Instant)> + '_ {
        self.deadlines
            .iter()
            .map(|(id, (deadline, _))| (*id, *deadline))
    }

    /// Starts over from `sessions` with a full timeout each: at start and on taking over as
    /// leader. Closes proposed by an earlier leader are forgotten (they may have been lost).
    pub fn grant_full_timeouts(
        &mut self,
        sessions: impl Iterator<Item = (i64, i32)>,
        now: Instant,
    ) {
        self.deadlines.clear();
        self.closing.clear();
        for (id, timeout_ms) in sessions {
            self.set(id, timeout_ms, now);
        }
    }

    /// Sessions whose deadline passed and whose close is not yet proposed (or was proposed
    /// so long ago that it was lost); they are marked as closing.
    pub fn take_expired(&mut self, now: Instant) -> Vec<i64> {
        self.closing
            .retain(|_, proposed| now.duration_since(*proposed) < CLOSE_RETRY);
        let expired: Vec<i64> = self
            .deadlines
            .iter()
            .filter(|(id, (deadline, _))| *deadline <= now && !self.closing.contains_key(id))
            .map(|(id, _)| *id)
            .collect();
        for id in &expired {
            self.closing.insert(*id, now);
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_touch_from_any_server_moves_the_deadline() {
        let t0 = Instant::now();
        let mut tracker = SessionTracker::default();
        tracker.set(1, 1000, t0);
        tracker.set(2, 1000, t0);
        tracker.touch(1, t0 + Duration::from_millis(900));
        tracker.touch_reported(2, 7, t0 + Duration::from_millis(900), 1);
        assert!(
            tracker
                .take_expired(t0 + Duration::from_millis(1500))
                .is_empty()
        );
        let mut expired = tracker.take_expired(t0 + Duration::from_millis(1900));
        expired.sort();
        assert_eq!(expired, vec![1, 2]);
        assert_eq!(tracker.take_touched(), vec![1]);
    }

    #[test]
    fn writes_from_a_server_the_session_left_are_refused() {
        let mut tracker = SessionTracker::default();
        assert!(
            tracker.owned_by(1, 10, 1),
            "a new leader takes the first server it hears from"
        );
        assert!(tracker.owned_by(1, 10, 1));
        tracker.claim(1, 20, 1);
        assert!(!tracker.owned_by(1, 10, 1), "the client moved to server 20");
        assert!(tracker.owned_by(1, 20, 1));
        tracker.remove(1);
        assert!(tracker.owned_by(1, 10, 1));
    }

    #[test]
    fn a_new_leader_forgets_the_owners_an_earlier_term_knew() {
        // Server 3 saw session 1 created through server 1 in term 2; the client resumed on
        // server 2, which told the leader of term 2 only. Leading in term 3, server 3 must
        // not refuse the client's writes from server 2.
        let mut tracker = SessionTracker::default();
        tracker.claim(1, 1, 2);
        assert!(
            tracker.owned_by(1, 2, 3),
            "term 3 starts a record of its own"
        );
        assert!(!tracker.owned_by(1, 1, 3), "and keeps it");
        tracker.claim(1, 1, 2);
        assert!(
            tracker.owned_by(1, 2, 3),
            "an earlier term's word changes nothing"
        );
        assert!(
            tracker.owned_by(1, 1, 2),
            "an earlier term's write is never logged: it is not refused here"
        );
        tracker.set(1, 1000, Instant::now());
        tracker.touch_reported(1, 1, Instant::now(), 4);
        assert!(tracker.owned_by(1, 1, 4), "learnt again in term 4");
    }

    #[test]
    fn a_lost_close_is_proposed_again_and_a_new_leader_forgets_it() {
        let t0 = Instant::now();
        let mut tracker = SessionTracker::default();
        tracker.set(1, 1000, t0);
        let late = t0 + Duration::from_secs(2);
        assert_eq!(tracker.take_expired(late), vec![1]);
        assert!(tracker.is_closing(1));
        assert!(tracker.take_expired(late).is_empty(), "proposed once");
        assert_eq!(tracker.take_expired(late + CLOSE_RETRY), vec![1], "retried");
        tracker.grant_full_timeouts([(1, 1000)].into_iter(), late);
        assert!(!tracker.is_closing(1));
        assert!(
            tracker
                .take_expired(late + Duration::from_millis(999))
                .is_empty()
        );
    }
}
