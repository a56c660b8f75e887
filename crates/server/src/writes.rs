//! One connection's writes on their way into the log, so that a change of leader costs the
//! client a delay rather than its connection.
//!
//! Each write is numbered on its connection (`seq`, 1, 2, 3...) and kept until it is applied.
//! It is handed to a leader together with that leader's term, and the leader appends it only
//! if it still leads in that term (openraft's conditional write): a write handed over in term
//! T can only ever enter the log as an entry of term T. Raft's log then settles its fate:
//! once this server applies an entry of a later term, every entry of term T that will ever be
//! committed lies before it, so a write of term T not applied by then never will be. It is
//! handed again, with its number, to the leader of the new term, and the writes the client
//! sent meanwhile, held back so that none overtakes it, follow in order. Nothing is ever
//! handed twice while an earlier copy could still commit, so nothing is applied twice.
//!
//! A write whose fate stays unknown (its channel broke but its leader's term goes on) is given
//! up after a bound: the connection is closed and the client sees ConnectionLoss, as a
//! ZooKeeper client does whenever its server loses the leader.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::consensus::Proposal;

/// Where writes in flight went: a leader, in a term it leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub leader: u64,
    pub term: u64,
}

/// How a write met the log when it was applied.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    /// The connection's next write, as expected.
    InOrder,
    /// Not the write expected (an earlier one was lost): the connection must close.
    OutOfOrder { expected: u64 },
    /// Not this connection's concern (it has nothing in flight with that number).
    Stale,
}

/// A connection's writes: numbered (`numbered`), of which the first `applied` are applied and
/// the first `handed` were handed to a leader; those after `handed` are held.
#[derive(Debug, Default)]
pub struct Writes {
    numbered: u64,
    applied: u64,
    handed: u64,
    /// The leader and term of the writes in flight (`applied..handed`).
    target: Option<Target>,
    /// Since when the writes in flight have been in doubt: their leader changed, their
    /// channel broke, or the leader refused one.
    in_doubt_since: Option<Instant>,
    /// Every write not yet applied, oldest first: `applied + 1 ..= numbered`.
    unapplied: VecDeque<Proposal>,
}

impl Writes {
    /// Numbers the next write.
    pub fn number(&mut self) -> u64 {
        self.numbered += 1;
        self.numbered
    }

    /// Keeps a numbered write until it is applied.
    pub fn keep(&mut self, proposal: Proposal) {
        debug_assert_eq!(
            proposal.origin.map(|o| o.seq),
            Some(self.applied + self.unapplied.len() as u64 + 1)
        );
        self.unapplied.push_back(proposal);
    }

    /// Writes numbered so far.
    pub fn numbered(&self) -> u64 {
        self.numbered
    }

    /// Writes applied so far.
    pub fn applied_count(&self) -> u64 {
        self.applied
    }

    /// Writes not yet applied (in flight or held).
    pub fn unapplied(&self) -> u64 {
        self.numbered - self.applied
    }

    /// Whether writes are handed to a leader and not yet applied.
    pub fn in_flight(&self) -> bool {
        self.handed > self.applied
    }

    /// The writes to hand to `target` now, in order: those not handed yet, unless writes in
    /// flight went to another leader or term, or are in doubt (then everything waits until
    /// their fate is known: a write handed to `target` could overtake them).
    pub fn take_for(&mut self, target: Target) -> Vec<Proposal> {
        if self.in_flight() && (self.target != Some(target) || self.in_doubt_since.is_some()) {
            return Vec::new();
        }
        let from = (self.handed - self.applied) as usize;
        let taken: Vec<Proposal> = self.unapplied.range(from..).cloned().collect();
        if !taken.is_empty() {
            self.handed = self.numbered;
            self.target = Some(target);
        }
        taken
    }

    /// Whether some writes wait to be handed to a leader.
    pub fn waiting(&self) -> bool {
        self.numbered > self.handed
    }

    /// Whether writes wait and nothing holds them back any more: nothing is in flight.
    pub fn ready(&self) -> bool {
        self.waiting() && !self.in_flight()
    }

    /// A write of this connection's was applied.
    pub fn applied(&mut self, seq: u64) -> Applied {
        if seq <= self.applied || seq > self.handed {
            // An entry of this connection's already applied, or one given up on (its copy
            // was handed again): neither can happen while Raft's log holds; refuse to count
            // it rather than answer twice.
            return if self.in_flight() || self.waiting() {
                Applied::OutOfOrder {
                    expected: self.applied + 1,
                }
            } else {
                Applied::Stale
            };
        }
        if seq != self.applied + 1 {
            return Applied::OutOfOrder {
                expected: self.applied + 1,
            };
        }
        self.applied = seq;
        self.unapplied.pop_front();
        if !self.in_flight() {
            self.in_doubt_since = None;
        }
        Applied::InOrder
    }

    /// Gives up every write not applied (the connection closes). Returns how many there were.
    pub fn abandon(&mut self) -> u64 {
        let lost = self.unapplied();
        self.applied = self.numbered;
        self.handed = self.numbered;
        self.unapplied.clear();
        self.in_doubt_since = None;
        lost
    }

    /// The fate of the writes in flight became unknown (their leader changed, their channel
    /// broke, or the leader refused one).
    pub fn doubt(&mut self, now: Instant) {
        if self.in_flight() {
            self.in_doubt_since.get_or_insert(now);
        }
    }

    /// An entry of `term` was applied: writes in flight to an earlier term can no longer
    /// commit, so they are handed again. Returns how many.
    pub fn settle(&mut self, term: u64) -> u64 {
        match self.target {
            Some(target) if self.in_flight() && target.term < term => {
                let lost = self.handed - self.applied;
                self.handed = self.applied;
                self.target = None;
                self.in_doubt_since = None;
                lost
            }
            _ => 0,
        }
    }

    /// Whether the writes in flight have been in doubt for longer than `bound`.
    pub fn doubtful_for(&self, now: Instant, bound: Duration) -> bool {
        self.in_doubt_since
            .is_some_and(|since| now.saturating_duration_since(since) > bound)
    }
}

#[cfg(test)]
mod tests {
    use warden_state::{Txn, TxnKind};

    use super::*;
    use crate::consensus::Origin;

    fn write(w: &mut Writes) -> u64 {
        let seq = w.number();
        w.keep(Proposal {
            origin: Some(Origin {
                node: 1,
                incarnation: 1,
                connection: 1,
                seq,
                xid: seq as i32,
            }),
            txn: Txn {
                session_id: 1,
                time_ms: 0,
                auth: Vec::new(),
                enforce_quota: false,
                kind: TxnKind::CloseSession,
            },
        });
        seq
    }

    fn seqs(taken: &[Proposal]) -> Vec<u64> {
        taken.iter().map(|p| p.origin.unwrap().seq).collect()
    }

    const OLD: Target = Target { leader: 1, term: 3 };
    const NEW: Target = Target { leader: 2, term: 4 };

    #[test]
    fn writes_follow_their_leader_in_order() {
        let mut w = Writes::default();
        write(&mut w);
        assert_eq!(seqs(&w.take_for(OLD)), [1]);
        write(&mut w);
        assert_eq!(seqs(&w.take_for(OLD)), [2]);
        assert_eq!(w.applied(1), Applied::InOrder);
        assert_eq!(w.applied(2), Applied::InOrder);
        assert_eq!(w.unapplied(), 0);
    }

    #[test]
    fn a_write_waits_behind_writes_in_flight_to_another_term() {
        let mut w = Writes::default();
        write(&mut w);
        write(&mut w);
        assert_eq!(seqs(&w.take_for(OLD)), [1, 2]);
        write(&mut w);
        assert!(w.take_for(NEW).is_empty(), "held behind 1 and 2");
        // The new leader committed 1 before its own first entry; 2 was lost.
        assert_eq!(w.applied(1), Applied::InOrder);
        assert_eq!(w.settle(NEW.term), 1);
        assert_eq!(seqs(&w.take_for(NEW)), [2, 3], "handed again, in order");
        assert_eq!(w.applied(2), Applied::InOrder);
        assert_eq!(w.applied(3), Applied::InOrder);
    }

    #[test]
    fn writes_held_behind_others_are_ready_once_those_are_applied() {
        let mut w = Writes::default();
        write(&mut w);
        w.take_for(OLD);
        write(&mut w);
        assert!(w.take_for(NEW).is_empty());
        assert!(!w.ready());
        // The new leader committed the old one: nothing is lost, the held one may go.
        assert_eq!(w.applied(1), Applied::InOrder);
        assert_eq!(w.settle(NEW.term), 0);
        assert!(w.ready());
        assert_eq!(seqs(&w.take_for(NEW)), [2]);
    }

    #[test]
    fn writes_wait_behind_writes_in_doubt_even_to_the_same_leader() {
        let mut w = Writes::default();
        write(&mut w);
        w.take_for(OLD);
        w.doubt(Instant::now());
        write(&mut w);
        assert!(
            w.take_for(OLD).is_empty(),
            "its channel broke: 1 may be lost"
        );
        assert_eq!(w.applied(1), Applied::InOrder);
        assert_eq!(seqs(&w.take_for(OLD)), [2]);
    }

    #[test]
    fn an_entry_of_the_same_term_settles_nothing() {
        let mut w = Writes::default();
        write(&mut w);
        w.take_for(OLD);
        assert_eq!(w.settle(OLD.term), 0);
        assert!(w.in_flight());
    }

    #[test]
    fn a_gap_is_out_of_order() {
        let mut w = Writes::default();
        write(&mut w);
        write(&mut w);
        w.take_for(OLD);
        assert_eq!(w.applied(2), Applied::OutOfOrder { expected: 1 });
        assert_eq!(w.abandon(), 2);
        assert_eq!(w.applied(3), Applied::Stale);
    }

    #[test]
    fn doubt_lasts_until_the_writes_are_applied_or_settled() {
        let mut w = Writes::default();
        let start = Instant::now();
        w.doubt(start);
        assert!(!w.doubtful_for(start + Duration::from_secs(9), Duration::from_secs(1)));
        write(&mut w);
        w.take_for(OLD);
        w.doubt(start);
        assert!(w.doubtful_for(start + Duration::from_secs(2), Duration::from_secs(1)));
        w.applied(1);
        assert!(!w.doubtful_for(start + Duration::from_secs(2), Duration::from_secs(1)));
    }
}
