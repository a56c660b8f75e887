package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// readFinal reads what the checkers compare the history with, from a fresh session after a
// sync, retrying until the bound.
func (r *run) readFinal(addresses []string) (final, error) {
	deadline := time.Now().Add(recoveryBound)
	var last error
	for time.Now().Before(deadline) {
		got, err := r.readFinalOnce(addresses)
		if err == nil {
			return got, nil
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	return final{}, last
}

func (r *run) readFinalOnce(addresses []string) (final, error) {
	c, err := connect(newRecorder(), "final", "final", addresses, 0)
	if err != nil {
		return final{}, err
	}
	defer c.conn.Close()
	return call(2*opTimeout, func() (final, error) {
		got := final{set: map[int64]bool{}, queue: map[int64]bool{}}
		if _, err := c.conn.Sync("/"); err != nil {
			return got, err
		}
		children, _, err := c.conn.Children("/set")
		if err != nil {
			return got, err
		}
		for _, child := range children {
			v, _ := strconv.ParseInt(strings.TrimPrefix(child, "e-"), 10, 64)
			got.set[v] = true
		}
		if got.ids, _, err = c.conn.Children("/ids"); err != nil {
			return got, err
		}
		queued, _, err := c.conn.Children("/queue")
		if err != nil {
			return got, err
		}
		for _, child := range queued {
			data, _, err := c.conn.Get("/queue/" + child)
			if err != nil && err != zk.ErrNoNode {
				return got, err
			}
			got.queue[decode(data)] = true
		}
		data, _, err := c.conn.Get(lockCounter)
		if err != nil {
			return got, err
		}
		got.counter = decode(data)
		if data, _, err = c.conn.Get(watchedNode); err != nil {
			return got, err
		}
		got.watched = decode(data)
		return got, nil
	})
}

func (r *run) report(got final, haveFinal bool) int {
	history := r.rec.snapshot()
	var b strings.Builder
	fmt.Fprintf(&b, "system=%s servers=%d profile=%s seed=%d linearizable-reads=%v\n", r.o.system, r.o.servers, r.o.profile, r.o.seed, r.o.linearizableReads)

	counts := map[string]map[outcome]int{}
	var names []string
	for _, o := range history {
		if counts[o.Workload] == nil {
			counts[o.Workload] = map[outcome]int{}
			names = append(names, o.Workload)
		}
		counts[o.Workload][o.Outcome]++
	}
	sort.Strings(names)
	b.WriteString("\noperations (ok / failed / unknown):\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-9s %6d / %5d / %5d\n", n, counts[n][ok], counts[n][failed], counts[n][unknown])
	}

	b.WriteString("\nfaults (ops invoked from the fault's start to the next one's; write gap: the longest time in that window without an acknowledged write; recovery: every writing client had an ok operation invoked after the heal):\n")
	fmt.Fprintf(&b, "  %-17s %9s %7s %6s %6s %7s %9s %9s  %s\n", "nemesis", "start", "held", "ok", "failed", "unknown", "write gap", "recovery", "what")
	for _, e := range r.episodes {
		var window [3]int
		for _, o := range history {
			if o.Call >= int64(e.start) && o.Call < int64(e.end) {
				switch o.Outcome {
				case ok:
					window[0]++
				case failed:
					window[1]++
				default:
					window[2]++
				}
			}
		}
		recovery := "-"
		if d, recovered := r.recovery(history, e); recovered {
			recovery = d.Round(time.Millisecond).String()
		}
		what := e.what
		if e.unhealthy != "" {
			what += " [did not come back: " + e.unhealthy + "]"
		}
		fmt.Fprintf(&b, "  %-17s %9v %7v %6d %6d %7d %9v %9s  %s\n", e.nemesis, e.start.Round(time.Millisecond), (e.healed - e.start).Round(time.Millisecond),
			window[0], window[1], window[2], writeGap(history, e).Round(time.Millisecond), recovery, what)
	}

	b.WriteString("\nchecks:\n")
	problems := append([]string(nil), r.problems...)
	verdict, found := checkRegister(history, r.o.linearizableReads, r.dir, r.o.checkTimeout)
	fmt.Fprintf(&b, "  register (linearizable): %s\n", verdict)
	problems = append(problems, found...)
	if !r.o.linearizableReads {
		found = checkSessionReads(history)
		fmt.Fprintf(&b, "  register plain reads (per session, never back in time): %d violations\n", len(found))
		problems = append(problems, found...)
	}
	if haveFinal {
		for _, check := range []struct {
			name string
			f    func([]op, final) (string, []string)
		}{{"set", checkSet}, {"ids", checkIDs}, {"queue", checkQueue}, {"lock", checkLock}, {"watch", checkWatcher},
			{"pwatch", func(history []op, _ final) (string, []string) { return checkPersistentWatch(history) }}} {
			summary, found := check.f(history, got)
			fmt.Fprintf(&b, "  %-6s %s: %d violations\n", check.name, summary, len(found))
			problems = append(problems, found...)
		}
	}
	if len(r.notes) > 0 {
		b.WriteString("\nnotes:\n  " + joinLines(r.notes) + "\n")
	}
	status := 0
	if len(problems) == 0 {
		b.WriteString("\nverdict: PASS\n")
	} else {
		status = 1
		if len(problems) > 40 {
			problems = append(problems[:40], fmt.Sprintf("... and %d more", len(problems)-40))
		}
		b.WriteString("\nverdict: FAIL\n  " + joinLines(problems) + "\n")
	}
	fmt.Fprintf(&b, "history: %s\n", filepath.Join(r.dir, "history.jsonl"))
	fmt.Print(b.String())
	if err := r.rec.save(filepath.Join(r.dir, "history.jsonl")); err != nil {
		fmt.Fprintf(os.Stderr, "faults: saving the history: %v\n", err)
	}
	_ = os.WriteFile(filepath.Join(r.dir, "report.txt"), []byte(b.String()), 0o644)
	return status
}

// recovery is the time from e's heal until every writing client had an ok operation invoked
// after it, if that happened before the next fault.
func (r *run) recovery(history []op, e *episode) (time.Duration, bool) {
	first := map[string]int64{}
	for _, o := range history {
		if o.Outcome != ok || o.Call < int64(e.healed) || o.Call >= int64(e.end) {
			continue
		}
		if t, seen := first[o.Client]; !seen || o.Return < t {
			first[o.Client] = o.Return
		}
	}
	var latest int64
	for _, c := range r.clients {
		if c.workload == "watcher" || c.workload == "lock" {
			continue
		}
		t, seen := first[c.name]
		if !seen {
			return 0, false
		}
		latest = max(latest, t)
	}
	return time.Duration(latest) - e.healed, true
}

// writeGap is the longest time from e's start to its end without an acknowledged write.
func writeGap(history []op, e *episode) time.Duration {
	var acked []int64
	for _, o := range history {
		if o.Outcome != ok || o.Return < int64(e.start) || o.Return >= int64(e.end) {
			continue
		}
		switch o.Kind {
		case "write", "cas", "add", "create-seq", "multi-create-seq", "enqueue":
			acked = append(acked, o.Return)
		}
	}
	sort.Slice(acked, func(i, j int) bool { return acked[i] < acked[j] })
	previous, gap := int64(e.start), int64(0)
	for _, t := range append(acked, int64(e.end)) {
		gap = max(gap, t-previous)
		previous = t
	}
	return time.Duration(gap)
}
