package main

// The checkers. Each returns the violations it found, in words; none means the workload held.

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// final is what a fresh session read after the run, once every fault was healed.
type final struct {
	set     map[int64]bool // /set's elements
	ids     []string       // /ids' children
	queue   map[int64]bool // values still in /queue
	counter int64          // /counter
	watched int64          // /watched's value
}

type regState struct {
	value   int64
	version int32
}

// registerModel is a register with ZooKeeper's versions: a read returns the value and version,
// a write makes version+1, a cas (setData with a version) succeeds only on that version. An
// operation with an unknown outcome may have taken effect or not.
var registerModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range history {
			key := o.Input.(op).Key
			if _, seen := byKey[key]; !seen {
				keys = append(keys, key)
			}
			byKey[key] = append(byKey[key], o)
		}
		sort.Strings(keys)
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{regState{}} },
	Step: func(state, input, _ interface{}) []interface{} {
		s, o := state.(regState), input.(op)
		next := regState{value: o.Value, version: s.version + 1}
		switch o.Kind {
		case "read", "sync-read":
			if o.Value == s.value && o.Version == s.version {
				return []interface{}{s}
			}
		case "write":
			if o.Outcome == unknown {
				return []interface{}{s, next}
			}
			if o.Version == next.version {
				return []interface{}{next}
			}
		case "cas":
			switch {
			case o.Outcome == ok && s.version == o.Expect && o.Version == next.version:
				return []interface{}{next}
			case o.Outcome == failed && s.version != o.Expect:
				return []interface{}{s}
			case o.Outcome == unknown && s.version == o.Expect:
				return []interface{}{s, next}
			case o.Outcome == unknown:
				return []interface{}{s}
			}
		}
		return nil
	},
	Hash: func(state interface{}) uint64 {
		s := state.(regState)
		return uint64(s.value)*1_000_003 + uint64(s.version)
	},
	DescribeOperation: func(input, _ interface{}) string {
		o := input.(op)
		switch o.Kind {
		case "read", "sync-read":
			return fmt.Sprintf("%s %s -> %d@v%d", o.Kind, o.Key, o.Value, o.Version)
		case "cas":
			return fmt.Sprintf("cas %s v%d := %d -> %s v%d", o.Key, o.Expect, o.Value, o.Outcome, o.Version)
		}
		return fmt.Sprintf("write %s := %d -> %s v%d", o.Key, o.Value, o.Outcome, o.Version)
	},
	DescribeState: func(state interface{}) string {
		s := state.(regState)
		return fmt.Sprintf("%d@v%d", s.value, s.version)
	},
}

// checkRegister checks the register's writes, compare-and-sets and sync + reads (and plain
// reads too when `allReads`) for linearizability with porcupine; a violation leaves porcupine's
// visualisation in `dir`.
func checkRegister(history []op, allReads bool, dir string, timeout time.Duration) (string, []string) {
	var ops []porcupine.Operation
	for _, o := range history {
		if o.Workload != "register" {
			continue
		}
		switch o.Kind {
		case "read":
			if !allReads || o.Outcome != ok {
				continue
			}
		case "sync-read":
			if o.Outcome != ok {
				continue
			}
		case "write":
			if o.Outcome == failed {
				continue
			}
		}
		ret := o.Return
		if o.Outcome == unknown {
			ret = math.MaxInt64
		}
		ops = append(ops, porcupine.Operation{ClientId: o.Process, Input: o, Output: o, Call: o.Call, Return: ret})
	}
	model := registerModel.ToModel()
	result, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	verdict := fmt.Sprintf("%d operations: %s", len(ops), result)
	switch result {
	case porcupine.Ok:
		return verdict, nil
	case porcupine.Unknown:
		return verdict, []string{fmt.Sprintf("register: porcupine gave no verdict within %v", timeout)}
	}
	path := filepath.Join(dir, "register-linearizability.html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		path = "(visualisation failed: " + err.Error() + ")"
	}
	return verdict, []string{"register: not linearizable; porcupine's visualisation: " + path}
}

// checkSessionReads checks what ZooKeeper promises for plain reads: within a session, a key's
// version never goes back from one it read or wrote; and every read of a version shows the value
// that produced it.
func checkSessionReads(history []op) []string {
	var violations []string
	valueAt := map[string]map[int32]int64{}
	bySession := map[int64][]op{}
	for _, o := range history {
		if o.Workload != "register" || o.Outcome != ok {
			continue
		}
		if o.Session != 0 {
			bySession[o.Session] = append(bySession[o.Session], o)
		}
		if valueAt[o.Key] == nil {
			valueAt[o.Key] = map[int32]int64{0: 0}
		}
		if seen, known := valueAt[o.Key][o.Version]; known && seen != o.Value {
			violations = append(violations, fmt.Sprintf("register: %s version %d has value %d and %d (%s by process %d at %v)",
				o.Key, o.Version, seen, o.Value, o.Kind, o.Process, time.Duration(o.Call)))
		} else {
			valueAt[o.Key][o.Version] = o.Value
		}
	}
	for session, ops := range bySession {
		sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
		highest := map[string]int32{}
		for _, o := range ops {
			if o.Version < highest[o.Key] {
				violations = append(violations, fmt.Sprintf("register: session 0x%x went back in time: %s of %s gave version %d after it had seen %d (at %v)",
					session, o.Kind, o.Key, o.Version, highest[o.Key], time.Duration(o.Call)))
			}
			highest[o.Key] = max(highest[o.Key], o.Version)
		}
	}
	return violations
}

func checkSet(history []op, got final) (string, []string) {
	acked, attempted := map[int64]bool{}, map[int64]bool{}
	for _, o := range history {
		if o.Workload == "set" && o.Kind == "add" {
			attempted[o.Value] = true
			if o.Outcome == ok {
				acked[o.Value] = true
			}
		}
	}
	var violations []string
	for v := range acked {
		if !got.set[v] {
			violations = append(violations, fmt.Sprintf("set: acknowledged element %d lost", v))
		}
	}
	for v := range got.set {
		if !attempted[v] {
			violations = append(violations, fmt.Sprintf("set: element %d present but never added", v))
		}
	}
	return fmt.Sprintf("%d acknowledged of %d attempted, %d present", len(acked), len(attempted), len(got.set)), violations
}

func checkIDs(history []op, got final) (string, []string) {
	present := map[string]bool{}
	for _, name := range got.ids {
		present["/ids/"+name] = true
	}
	owner := map[string]op{}
	lastBySession := map[int64]op{}
	attempts := 0
	var violations []string
	sorted := append([]op(nil), history...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	for _, o := range sorted {
		if o.Workload != "ids" {
			continue
		}
		attempts++
		if o.Outcome != ok {
			continue
		}
		if first, taken := owner[o.Name]; taken {
			violations = append(violations, fmt.Sprintf("ids: %s handed out twice (processes %d and %d)", o.Name, first.Process, o.Process))
		}
		owner[o.Name] = o
		if !present[o.Name] {
			violations = append(violations, fmt.Sprintf("ids: acknowledged %s missing at the end", o.Name))
		}
		if before, seen := lastBySession[o.Session]; seen && o.Session != 0 && before.Name >= o.Name {
			violations = append(violations, fmt.Sprintf("ids: session 0x%x got %s after %s", o.Session, o.Name, before.Name))
		}
		lastBySession[o.Session] = o
	}
	if len(present) > attempts {
		violations = append(violations, fmt.Sprintf("ids: %d names present but only %d creates attempted", len(present), attempts))
	}
	return fmt.Sprintf("%d acknowledged of %d attempted, %d present", len(owner), attempts, len(present)), violations
}

func checkQueue(history []op, got final) (string, []string) {
	enqueued, attempted := map[int64]bool{}, map[int64]bool{}
	consumed, maybeConsumed := map[int64]int{}, map[int64]bool{}
	for _, o := range history {
		switch {
		case o.Workload == "producer" && o.Kind == "enqueue":
			attempted[o.Value] = true
			if o.Outcome == ok {
				enqueued[o.Value] = true
			}
		case o.Workload == "consumer" && o.Kind == "dequeue":
			switch o.Outcome {
			case ok:
				consumed[o.Value]++
			case unknown:
				maybeConsumed[o.Value] = true
			}
		}
	}
	var violations []string
	for v, n := range consumed {
		if n > 1 {
			violations = append(violations, fmt.Sprintf("queue: %d consumed %d times", v, n))
		}
		if !attempted[v] {
			violations = append(violations, fmt.Sprintf("queue: %d consumed but never enqueued", v))
		}
	}
	lost := 0
	for v := range enqueued {
		if consumed[v] == 0 && !maybeConsumed[v] && !got.queue[v] {
			lost++
			if lost <= 10 {
				violations = append(violations, fmt.Sprintf("queue: acknowledged %d neither consumed nor in the queue", v))
			}
		}
	}
	return fmt.Sprintf("%d enqueued, %d consumed, %d left", len(enqueued), len(consumed), len(got.queue)), violations
}

// checkLock: the counter that only lock holders increment lost no increment (each holder reads
// it and writes it + 1 without a version), no two acknowledged holds overlap in time, and no
// session lost its lock node without being told that it expired.
func checkLock(history []op, got final) (string, []string) {
	var violations []string
	increments, maybe := 0, 0
	acquired := map[string]op{}
	type hold struct {
		name     string
		from, to int64
	}
	var holds []hold
	sorted := append([]op(nil), history...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	for _, o := range sorted {
		if o.Workload != "lock" {
			continue
		}
		switch o.Kind {
		case "counter-write":
			if o.Outcome == ok {
				increments++
			} else if o.Outcome == unknown {
				maybe++
			}
		case "lock-acquired":
			acquired[o.Name] = o
		case "unlock":
			if a, held := acquired[o.Name]; held && o.Outcome == ok {
				holds = append(holds, hold{o.Name, a.Return, o.Call})
			}
		case "lock-vanished":
			violations = append(violations, fmt.Sprintf("lock: %s of session 0x%x vanished while the session was never told it expired", o.Name, o.Session))
		}
	}
	if got.counter < int64(increments) {
		violations = append(violations, fmt.Sprintf("lock: counter is %d after %d acknowledged increments: two holders at once", got.counter, increments))
	}
	if got.counter > int64(increments+maybe) {
		violations = append(violations, fmt.Sprintf("lock: counter is %d after at most %d increments", got.counter, increments+maybe))
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].from < holds[j].from })
	for i := 1; i < len(holds); i++ {
		if holds[i].from < holds[i-1].to {
			violations = append(violations, fmt.Sprintf("lock: %s held from %v while %s held until %v",
				holds[i].name, time.Duration(holds[i].from), holds[i-1].name, time.Duration(holds[i-1].to)))
		}
	}
	return fmt.Sprintf("%d holds, counter %d (%d acknowledged increments, %d unknown)", len(holds), got.counter, increments, maybe), violations
}

// checkWatcher: the versions the watcher read after each notification never go back, and it saw
// the last write.
func checkWatcher(history []op, got final) (string, []string) {
	var reads []op
	for _, o := range history {
		if o.Workload == "watcher" && o.Outcome == ok {
			reads = append(reads, o)
		}
	}
	sort.Slice(reads, func(i, j int) bool { return reads[i].Call < reads[j].Call })
	var violations []string
	for i := 1; i < len(reads); i++ {
		if reads[i].Version < reads[i-1].Version {
			violations = append(violations, fmt.Sprintf("watch: read version %d after %d (at %v)", reads[i].Version, reads[i-1].Version, time.Duration(reads[i].Call)))
		}
	}
	if len(reads) == 0 || reads[len(reads)-1].Value != got.watched {
		last := "nothing"
		if len(reads) > 0 {
			last = strconv.FormatInt(reads[len(reads)-1].Value, 10)
		}
		violations = append(violations, fmt.Sprintf("watch: the watcher's last read saw %s, the node holds %d", last, got.watched))
	}
	return fmt.Sprintf("%d notifications read", len(reads)), violations
}

func joinLines(lines []string) string { return strings.Join(lines, "\n  ") }
