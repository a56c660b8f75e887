package main

// The checkers catch what they are for: each test gives a deliberately wrong history (what a
// server with a known bug would produce) and expects a violation, and the same history made
// right passes.

import (
	"strings"
	"testing"
	"time"
)

func reg(process int, session int64, kind string, value int64, version int32, call, ret int64, out outcome) op {
	return op{Workload: "register", Process: process, Session: session, Kind: kind, Key: "/register/k0",
		Value: value, Version: version, Call: call, Return: ret, Outcome: out}
}

func TestRegisterStaleSyncReadIsCaught(t *testing.T) {
	history := []op{
		reg(0, 1, "write", 7, 1, 0, 10, ok),
		// After the write was acknowledged, a sync + read still sees the initial value.
		reg(1, 2, "sync-read", 0, 0, 20, 30, ok),
	}
	if _, found := checkRegister(history, false, t.TempDir(), time.Minute); len(found) == 0 {
		t.Fatal("a sync + read older than an acknowledged write was not caught")
	}
	history[1] = reg(1, 2, "sync-read", 7, 1, 20, 30, ok)
	if verdict, found := checkRegister(history, false, t.TempDir(), time.Minute); len(found) != 0 {
		t.Fatalf("a correct history was refused: %s %v", verdict, found)
	}
}

func TestRegisterLostWriteIsCaught(t *testing.T) {
	history := []op{
		reg(0, 1, "write", 7, 1, 0, 10, ok),
		reg(1, 2, "write", 8, 2, 20, 30, ok),
		// Version 2 came back with the first write's value: the second write was lost.
		reg(2, 3, "sync-read", 7, 2, 40, 50, ok),
	}
	if _, found := checkRegister(history, false, t.TempDir(), time.Minute); len(found) == 0 {
		t.Fatal("a lost write was not caught")
	}
}

func TestRegisterUnknownWriteMayApplyLate(t *testing.T) {
	history := []op{
		reg(0, 1, "write", 7, 0, 0, 10, unknown),
		reg(1, 2, "sync-read", 0, 0, 20, 30, ok),
		reg(2, 3, "sync-read", 7, 1, 40, 50, ok),
	}
	if verdict, found := checkRegister(history, false, t.TempDir(), time.Minute); len(found) != 0 {
		t.Fatalf("an unknown write that took effect late was refused: %s %v", verdict, found)
	}
}

func TestCasOnWrongVersionIsCaught(t *testing.T) {
	history := []op{
		reg(0, 1, "write", 7, 1, 0, 10, ok),
		// A compare-and-set that expected version 0 succeeded after version 1 existed.
		{Workload: "register", Process: 1, Session: 2, Kind: "cas", Key: "/register/k0", Value: 9, Expect: 0, Version: 1, Call: 20, Return: 30, Outcome: ok},
	}
	if _, found := checkRegister(history, false, t.TempDir(), time.Minute); len(found) == 0 {
		t.Fatal("a compare-and-set on a stale version was not caught")
	}
}

func TestPlainReadBackInTimeIsCaught(t *testing.T) {
	history := []op{
		reg(0, 1, "write", 7, 1, 0, 10, ok),
		reg(0, 1, "read", 0, 0, 20, 30, ok),
	}
	if found := checkSessionReads(history); len(found) == 0 || !strings.Contains(found[0], "back in time") {
		t.Fatalf("a session reading older than its own write was not caught: %v", found)
	}
	// Another session may read the older version: plain reads are not linearizable.
	history[1].Session = 2
	if found := checkSessionReads(history); len(found) != 0 {
		t.Fatalf("another session's older read was refused: %v", found)
	}
}

func TestSetLossIsCaught(t *testing.T) {
	history := []op{{Workload: "set", Kind: "add", Value: 1, Outcome: ok}, {Workload: "set", Kind: "add", Value: 2, Outcome: unknown}}
	if _, found := checkSet(history, final{set: map[int64]bool{2: true}}); len(found) == 0 {
		t.Fatal("a lost acknowledged element was not caught")
	}
	if _, found := checkSet(history, final{set: map[int64]bool{1: true, 3: true}}); len(found) == 0 {
		t.Fatal("an element never added was not caught")
	}
	if _, found := checkSet(history, final{set: map[int64]bool{1: true}}); len(found) != 0 {
		t.Fatalf("a correct set was refused: %v", found)
	}
}

func TestDuplicateIDIsCaught(t *testing.T) {
	history := []op{
		{Workload: "ids", Kind: "create-seq", Session: 1, Name: "/ids/id-0000000001", Call: 0, Outcome: ok},
		{Workload: "ids", Kind: "multi-create-seq", Session: 2, Name: "/ids/id-0000000001", Call: 5, Outcome: ok},
	}
	if _, found := checkIDs(history, final{ids: []string{"id-0000000001"}}); len(found) == 0 {
		t.Fatal("a name handed out twice was not caught")
	}
}

func TestQueueDoubleConsumeAndLossAreCaught(t *testing.T) {
	history := []op{
		{Workload: "producer", Kind: "enqueue", Value: 1, Outcome: ok},
		{Workload: "producer", Kind: "enqueue", Value: 2, Outcome: ok},
		{Workload: "consumer", Kind: "dequeue", Value: 1, Outcome: ok},
		{Workload: "consumer", Kind: "dequeue", Value: 1, Outcome: ok},
	}
	_, found := checkQueue(history, final{queue: map[int64]bool{}})
	if len(found) != 2 {
		t.Fatalf("expected a double consumption and a loss, got %v", found)
	}
}

func TestLostIncrementIsCaught(t *testing.T) {
	history := []op{
		{Workload: "lock", Kind: "counter-write", Value: 1, Outcome: ok},
		{Workload: "lock", Kind: "counter-write", Value: 1, Outcome: ok},
	}
	if _, found := checkLock(history, final{counter: 1}); len(found) == 0 {
		t.Fatal("two holders at once (a lost increment) were not caught")
	}
	if _, found := checkLock(history, final{counter: 2}); len(found) != 0 {
		t.Fatalf("a correct counter was refused: %v", found)
	}
}

func TestOverlappingHoldsAreCaught(t *testing.T) {
	history := []op{
		{Workload: "lock", Kind: "lock-acquired", Name: "/lock/n-1", Call: 0, Return: 10, Outcome: ok},
		{Workload: "lock", Kind: "lock-acquired", Name: "/lock/n-2", Call: 15, Return: 20, Outcome: ok},
		{Workload: "lock", Kind: "unlock", Name: "/lock/n-1", Call: 30, Return: 40, Outcome: ok},
		{Workload: "lock", Kind: "unlock", Name: "/lock/n-2", Call: 50, Return: 60, Outcome: ok},
	}
	if _, found := checkLock(history, final{}); len(found) == 0 {
		t.Fatal("two overlapping holds were not caught")
	}
}

func TestWatcherGoingBackIsCaught(t *testing.T) {
	history := []op{
		{Workload: "watcher", Kind: "watch-read", Value: 5, Version: 3, Call: 0, Outcome: ok},
		{Workload: "watcher", Kind: "watch-read", Value: 4, Version: 2, Call: 10, Outcome: ok},
	}
	if _, found := checkWatcher(history, final{watched: 4}); len(found) == 0 {
		t.Fatal("a watcher reading an older version was not caught")
	}
}

func pwChange(kind, path string, call, ret int64, out outcome) op {
	return op{Workload: "pwriter", Kind: kind, Name: path, Call: call, Return: ret, Outcome: out}
}

func pwRecord(kind, key, path string, zxid, at int64) op {
	return op{Workload: "pwatcher", Kind: kind, Key: key, Name: path, Value: zxid, Call: at, Return: at, Outcome: ok}
}

// A persistent watch's history: three creates, a delete, an unknown create and the final one;
// the watcher loses its connection once.
func persistentHistory() []op {
	return []op{
		pwChange("pw-create", "/pwatch/e-1", 0, 10, ok),
		pwChange("pw-create", "/pwatch/e-2", 20, 30, ok),
		pwChange("pw-create", "/pwatch/e-3", 40, 50, unknown),
		pwChange("pw-delete", "/pwatch/e-1", 60, 70, ok),
		pwChange("pw-create", "/pwatch/e-4", 80, 90, ok),
		pwChange("pw-final", "/pwatch/e-5", 200, 210, ok),
		pwRecord("pw-state", "SyncConnected", "", 0, 1),
		pwRecord("pw-event", "NodeCreated", "/pwatch/e-1", 0x101, 9),
		pwRecord("pw-event", "NodeCreated", "/pwatch/e-2", 0x102, 29),
		// e-3's outcome is unknown: not reporting it is allowed.
		pwRecord("pw-event", "NodeDeleted", "/pwatch/e-1", 0x104, 69),
		pwRecord("pw-state", "Disconnected", "", 0, 75),
		pwRecord("pw-state", "SyncConnected", "", 0, 100),
		// A server that had not applied the delete reports it again after the reconnection.
		pwRecord("pw-event", "NodeDeleted", "/pwatch/e-1", 0x104, 120),
		pwRecord("pw-event", "NodeCreated", "/pwatch/e-4", 0x105, 121),
		pwRecord("pw-event", "NodeCreated", "/pwatch/e-5", 0x106, 209),
	}
}

func TestPersistentWatchCorrectHistoriesPass(t *testing.T) {
	if summary, found := checkPersistentWatch(persistentHistory()); len(found) != 0 {
		t.Fatalf("a correct history was refused: %s %v", summary, found)
	}
	// Changes made while the watcher was disconnected need not be reported.
	h := persistentHistory()
	h = append(h[:12], h[14:]...)
	if summary, found := checkPersistentWatch(h); len(found) != 0 {
		t.Fatalf("a correct history was refused: %s %v", summary, found)
	}
}

func TestPersistentWatchWrongHistoriesAreCaught(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func([]op) []op
		want   string
	}{
		{"a change missed in one connection", func(h []op) []op { return append(h[:8], h[9:]...) }, "not reported between"},
		{"changes out of order", func(h []op) []op {
			h[7] = pwRecord("pw-event", "NodeCreated", "/pwatch/e-2", 0x101, 29)
			h[8] = pwRecord("pw-event", "NodeCreated", "/pwatch/e-1", 0x102, 30)
			return h
		}, "which was made after it"},
		{"a change never made", func(h []op) []op {
			return append(h, pwRecord("pw-event", "NodeCreated", "/pwatch/e-9", 0x107, 215))
		}, "never made"},
		{"a change reported twice in one connection", func(h []op) []op {
			return append(h, pwRecord("pw-event", "NodeCreated", "/pwatch/e-5", 0x106, 215))
		}, "twice"},
		{"a zxid going back in one connection", func(h []op) []op { h[9].Value = 0x100; return h }, "after"},
		{"the final change not reported", func(h []op) []op { return h[:len(h)-1] }, "final change"},
	} {
		_, found := checkPersistentWatch(c.change(persistentHistory()))
		if !strings.Contains(strings.Join(found, "\n"), c.want) {
			t.Errorf("%s: not caught (found %v)", c.name, found)
		}
	}
}
