package main

// The persistent-watch workload: a writer creates and deletes children of /pwatch while a
// real ZooKeeper Java client (PersistentWatcher.java) holds a PERSISTENT_RECURSIVE watch on it.
// Each change names its own path, so every event names the change it reports, and the checker
// can require what ZooKeeper promises a session that stays connected: every change, once, in
// order, with rising zxids.

import (
	"bufio"
	_ "embed"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

const pwatchRoot = "/pwatch"

//go:embed PersistentWatcher.java
var persistentWatcherSource []byte

// pwatcher is the Java watcher's process; its lines go into the history as they arrive.
type pwatcher struct {
	cmd      *exec.Cmd
	watching chan struct{} // closed at its first "watching" line
	done     chan struct{} // closed when its output ends
}

// startPersistentWatcher starts the Java watcher (its source written into `dir`, run by java's
// source launcher) with ZooKeeper 3.9.5's jars from `lib`; its stderr (the client's log) goes
// to pwatcher.log in `dir`.
func startPersistentWatcher(rec *recorder, lib string, addresses []string, dir string) (*pwatcher, error) {
	source := filepath.Join(dir, "PersistentWatcher.java")
	if err := os.WriteFile(source, persistentWatcherSource, 0o644); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "pwatcher.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("java", "-Xmx128m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", filepath.Join(lib, "*"), source, strings.Join(addresses, ","), pwatchRoot,
		strconv.Itoa(int(sessionTimeout/time.Millisecond)))
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("starting the persistent watcher: %w", err)
	}
	w := &pwatcher{cmd: cmd, watching: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer log.Close()
		seen := false
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			now := rec.now()
			o := op{Workload: "pwatcher", Client: "pwatcher-1", Process: -1, Call: now, Return: now, Outcome: ok}
			fields := strings.Fields(lines.Text())
			switch {
			case len(fields) == 2 && fields[0] == "state":
				o.Kind, o.Key = "pw-state", fields[1]
			case len(fields) == 2 && fields[0] == "watching":
				o.Kind = "pw-watching"
				o.Session, _ = strconv.ParseInt(fields[1], 16, 64)
				if !seen {
					seen = true
					close(w.watching)
				}
			case len(fields) == 4 && fields[0] == "event":
				o.Kind, o.Key, o.Name = "pw-event", fields[1], fields[2]
				o.Value, _ = strconv.ParseInt(fields[3], 10, 64)
			default:
				o.Kind, o.Error = "pw-unparsed", lines.Text()
			}
			rec.add(o)
		}
	}()
	select {
	case <-w.watching:
		return w, nil
	case <-w.done:
	case <-time.After(90 * time.Second):
	}
	w.stop()
	return nil, fmt.Errorf("the persistent watcher set no watch within 90 s; its log: %s", lastLines(log.Name(), 5))
}

// stop kills the watcher (the suite's own child, by its PID) and waits for it.
func (w *pwatcher) stop() {
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
	<-w.done
}

// runPersistentWriter creates children of /pwatch with unique names and deletes some it created.
func runPersistentWriter(c *client, rng *rand.Rand, stop <-chan struct{}) {
	var created []string
	for pause(rng, stop, 20*time.Millisecond, 60*time.Millisecond) {
		if len(created) > 0 && rng.Intn(4) == 0 {
			k := rng.Intn(len(created))
			path := created[k]
			created = append(created[:k], created[k+1:]...)
			c.do(op{Kind: "pw-delete", Name: path}, func(o *op) error { return c.conn.Delete(path, -1) })
			continue
		}
		path := fmt.Sprintf("%s/e-%d", pwatchRoot, nextValue())
		o := c.do(op{Kind: "pw-create", Name: path}, func(o *op) error {
			_, err := c.conn.Create(path, nil, 0, acl)
			return err
		})
		if o.Outcome == ok {
			created = append(created, path)
		}
	}
}

// finalPersistentChange makes one more change once every fault is healed and the workers have
// stopped, and waits until the watcher reports it or the bound passes (the checker then says so).
func (r *run) finalPersistentChange(c *client, bound time.Duration) {
	path := fmt.Sprintf("%s/e-%d", pwatchRoot, nextValue())
	c.do(op{Kind: "pw-final", Name: path}, func(o *op) error {
		_, err := c.conn.Create(path, nil, 0, acl)
		return err
	})
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		for _, o := range r.rec.snapshot() {
			if o.Kind == "pw-event" && o.Name == path {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkPersistentWatch: within each stretch of the watcher's connection (from one SyncConnected
// to the next state change), the events report changes that were made, each once, in the order
// they were made, with rising zxids, and with no acknowledged change missing between two
// reported ones; and the final change, made after every fault was healed, was reported.
// Across a reconnection ZooKeeper promises less: changes made while disconnected are not
// reported, and a server behind the last one may report some again.
func checkPersistentWatch(history []op) (string, []string) {
	writes := map[string]op{} // "NodeCreated /pwatch/e-1" -> the create
	var changes, records []op
	for _, o := range history {
		switch o.Kind {
		case "pw-create", "pw-final":
			writes["NodeCreated "+o.Name] = o
			changes = append(changes, o)
		case "pw-delete":
			writes["NodeDeleted "+o.Name] = o
			changes = append(changes, o)
		case "pw-state", "pw-watching", "pw-event", "pw-unparsed":
			records = append(records, o)
		}
	}
	sort.SliceStable(records, func(i, j int) bool { return records[i].Call < records[j].Call })
	sort.Slice(changes, func(i, j int) bool { return changes[i].Call < changes[j].Call })
	var violations []string
	add := func(format string, args ...any) {
		if len(violations) < 20 {
			violations = append(violations, "pwatch: "+fmt.Sprintf(format, args...))
		}
	}
	events, stretches := 0, 0
	var final op
	for _, o := range changes {
		if o.Kind == "pw-final" {
			final = o
		}
	}
	finalSeen := false
	var stretch []op // the changes reported in the current stretch, in order
	var lastZxid int64
	inStretch := map[string]bool{}
	for _, rec := range records {
		switch rec.Kind {
		case "pw-unparsed":
			add("the watcher printed %q", rec.Error)
			continue
		case "pw-watching":
			continue
		case "pw-state":
			stretch, lastZxid, inStretch = nil, 0, map[string]bool{}
			if rec.Key == "SyncConnected" {
				stretches++
			}
			continue
		}
		events++
		key := rec.Key + " " + rec.Name
		w, made := writes[key]
		switch {
		case !made:
			add("%s reported at %v, a change never made", key, time.Duration(rec.Call))
			continue
		case w.Outcome == failed:
			add("%s reported at %v, a change the server refused", key, time.Duration(rec.Call))
			continue
		case rec.Call < w.Call:
			add("%s reported at %v, before it was asked for at %v", key, time.Duration(rec.Call), time.Duration(w.Call))
			continue
		case inStretch[key]:
			add("%s reported twice in one connection (at %v)", key, time.Duration(rec.Call))
			continue
		}
		finalSeen = finalSeen || w.Kind == "pw-final"
		if rec.Value <= lastZxid {
			add("%s at %v has zxid 0x%x after 0x%x in one connection", key, time.Duration(rec.Call), rec.Value, lastZxid)
		}
		lastZxid = rec.Value
		if len(stretch) > 0 {
			previous := stretch[len(stretch)-1]
			if previous.Outcome == ok && w.Outcome == ok && w.Return < previous.Call {
				add("%s reported after %s, which was made after it", key, changeKey(previous))
			}
			// Changes are sorted by invocation: those invoked after `previous` returned start here.
			from := sort.Search(len(changes), func(i int) bool { return changes[i].Call > previous.Return })
			for _, missed := range changes[from:] {
				if missed.Call >= w.Call {
					break
				}
				if missed.Outcome == ok && missed.Return < w.Call {
					add("%s not reported between %s and %s (at %v) in one connection", changeKey(missed), changeKey(previous), key, time.Duration(rec.Call))
				}
			}
		}
		stretch = append(stretch, w)
		inStretch[key] = true
	}
	if final.Kind == "" {
		add("no final change was made")
	} else if !finalSeen {
		add("the final change %s, made after every fault was healed, was not reported", changeKey(final))
	}
	return fmt.Sprintf("%d changes, %d events over %d connections", len(changes), events, stretches), violations
}

func changeKey(o op) string {
	if o.Kind == "pw-delete" {
		return "NodeDeleted " + o.Name
	}
	return "NodeCreated " + o.Name
}
