// Command faults runs Warden's fault suite: real go-zookeeper clients against a real cluster of
// `warden server` processes (or of ZooKeeper 3.9.5, the reference), each server in a network
// namespace of its own, while a seeded nemesis kills, pauses, partitions and damages servers;
// then it heals every fault, requires every client to make progress again, and checks the
// history: the register for linearizability with porcupine, and sets, unique ids, a queue, a
// lock and a watch for what ZooKeeper promises. See docs/faults.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type profile struct {
	episodes      int
	registerKeys  int
	hold, quiet   [2]time.Duration // ranges
	overlapChance float64          // chance that an episode injects a second fault at once
}

var profiles = map[string]profile{
	"short": {episodes: 12, registerKeys: 4, hold: [2]time.Duration{3 * time.Second, 5 * time.Second}, quiet: [2]time.Duration{4 * time.Second, 6 * time.Second}},
	"long":  {episodes: 120, registerKeys: 24, hold: [2]time.Duration{3 * time.Second, 15 * time.Second}, quiet: [2]time.Duration{3 * time.Second, 10 * time.Second}, overlapChance: 0.3},
}

const recoveryBound = 30 * time.Second

type options struct {
	system            system
	binary            string
	servers           int
	seed              int64
	profile           string
	episodes          int
	out               string
	linearizableReads bool
	checkTimeout      time.Duration
	only              string
	zookeeperLib      string
}

func main() {
	var o options
	var sys string
	flag.StringVar(&sys, "system", "warden", "warden or zookeeper")
	flag.StringVar(&o.binary, "binary", "", "the warden binary, or scripts/zookeeper/run.sh")
	flag.IntVar(&o.servers, "servers", 3, "servers in the cluster")
	flag.Int64Var(&o.seed, "seed", 0, "seed (0: from the clock); the same seed injects the same faults at the same points")
	flag.StringVar(&o.profile, "profile", "short", "short or long")
	flag.IntVar(&o.episodes, "episodes", 0, "fault episodes (0: the profile's)")
	flag.StringVar(&o.out, "out", "faults-runs", "directory for the run's files")
	flag.BoolVar(&o.linearizableReads, "linearizable-reads", false, "Warden's cluster.linearizable_reads on; every read checked as linearizable")
	flag.StringVar(&o.only, "nemeses", "", "comma-separated nemeses to use (default: all)")
	flag.StringVar(&o.zookeeperLib, "zookeeper-lib", "", "ZooKeeper 3.9.5's jars, for the persistent watcher (a Java client)")
	flag.DurationVar(&o.checkTimeout, "check-timeout", 0, "porcupine's time limit (0: 3 minutes, 20 for the long profile)")
	flag.Parse()
	o.system = system(sys)
	if o.system != systemWarden && o.system != systemZooKeeper || o.binary == "" || o.zookeeperLib == "" {
		fmt.Fprintln(os.Stderr, "faults: -system warden|zookeeper, -binary and -zookeeper-lib are required")
		os.Exit(2)
	}
	if _, known := profiles[o.profile]; !known {
		fmt.Fprintf(os.Stderr, "faults: no profile %q (short, long)\n", o.profile)
		os.Exit(2)
	}
	if o.checkTimeout == 0 {
		o.checkTimeout = 3 * time.Minute
		if o.profile == "long" {
			o.checkTimeout = 20 * time.Minute
		}
	}
	if o.linearizableReads && o.system != systemWarden {
		fmt.Fprintln(os.Stderr, "faults: -linearizable-reads is Warden's setting; ZooKeeper has none")
		os.Exit(2)
	}
	registerKeys = profiles[o.profile].registerKeys
	if o.seed == 0 {
		o.seed = time.Now().UnixNano() % 1_000_000_000
	}
	os.Exit(runSuite(o))
}

func runSuite(o options) int {
	name := string(o.system)
	if o.linearizableReads {
		name += "-linearizable"
	}
	dir, err := filepath.Abs(filepath.Join(o.out, fmt.Sprintf("%s-%d", name, o.seed)))
	if err == nil {
		_ = os.RemoveAll(dir)
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		return 2
	}
	fmt.Printf("faults: system=%s servers=%d profile=%s seed=%d linearizable-reads=%v dir=%s\n",
		o.system, o.servers, o.profile, o.seed, o.linearizableReads, dir)
	nw, err := newNetwork(o.servers)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		return 2
	}
	extra := ""
	if o.linearizableReads {
		extra = "linearizableReads=true\n"
	}
	c, err := newCluster(o.system, o.binary, nw, dir, o.servers, extra)
	if err != nil {
		nw.teardown()
		fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		return 2
	}
	r := &run{o: o, c: c, dir: dir, rng: rand.New(rand.NewSource(o.seed))}
	cleanup := sync.OnceFunc(func() {
		if w := r.pwatcher.Load(); w != nil {
			w.stop()
		}
		c.killAll()
		nw.teardown()
	})
	defer cleanup()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "faults: %v: stopping the servers and removing the network\n", sig)
		cleanup()
		os.Exit(2)
	}()
	return r.execute()
}

type run struct {
	o        options
	c        *cluster
	dir      string
	rng      *rand.Rand
	rec      *recorder
	clients  []*client
	episodes []*episode
	notes    []string // what happened that is not a violation
	problems []string // violations and failures to recover
	pwatcher atomic.Pointer[pwatcher]
}

type worker struct {
	workload string
	count    int
	loop     func(*client, *rand.Rand, <-chan struct{})
}

var workers = []worker{
	{"register", 5, runRegister},
	{"set", 2, runSet},
	{"ids", 2, runIDs},
	{"producer", 2, runProducer},
	{"consumer", 2, runConsumer},
	{"lock", 3, runLock},
	{"writer", 1, runWatchedWriter},
	{"pwriter", 1, runPersistentWriter},
}

func (r *run) execute() int {
	started := time.Now()
	for i := range r.c.servers {
		if err := r.c.start(i); err != nil {
			fmt.Fprintf(os.Stderr, "faults: %v\n", err)
			return 2
		}
	}
	if err := r.c.waitServing(90 * time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "faults: the cluster did not start: %v (logs in %s)\n", err, r.dir)
		return 2
	}
	fmt.Printf("faults: %d servers serving after %v\n", len(r.c.servers), time.Since(started).Round(time.Millisecond))
	var addresses []string
	for i := range r.c.servers {
		addresses = append(addresses, r.c.clientAddress(i))
	}
	r.rec = newRecorder()
	setup, err := connect(newRecorder(), "setup", "setup", addresses, 0)
	if err == nil {
		err = prepare(setup)
		setup.conn.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		return 2
	}

	stop, stopWatcher := make(chan struct{}), make(chan struct{})
	var wg, watcherDone sync.WaitGroup
	spawn := func(name, workload string, loop func(*client, *rand.Rand, <-chan struct{}), until <-chan struct{}, group *sync.WaitGroup) {
		c, err := connect(r.rec, name, workload, addresses, len(r.clients)%len(addresses))
		if err != nil {
			r.problems = append(r.problems, err.Error())
			return
		}
		r.clients = append(r.clients, c)
		rng := rand.New(rand.NewSource(r.rng.Int63()))
		group.Add(1)
		go func() {
			defer group.Done()
			loop(c, rng, until)
		}()
	}
	for _, w := range workers {
		for k := 0; k < w.count; k++ {
			spawn(fmt.Sprintf("%s-%d", w.workload, k+1), w.workload, w.loop, stop, &wg)
		}
	}
	spawn("watcher-1", "watcher", runWatcher, stopWatcher, &watcherDone)
	if w, err := startPersistentWatcher(r.rec, r.o.zookeeperLib, addresses, r.dir); err != nil {
		r.problems = append(r.problems, err.Error())
	} else {
		r.pwatcher.Store(w)
	}
	time.Sleep(3 * time.Second)

	r.injectFaults()
	healed := r.rec.now()
	fmt.Printf("faults: every fault healed at %v; waiting for every client to make progress\n", time.Duration(healed).Round(time.Millisecond))
	r.awaitRecovery(healed)

	close(stop)
	if !waitGroup(&wg, opTimeout+10*time.Second) {
		r.problems = append(r.problems, "workers did not stop within the operation timeout")
	}
	got, err := r.readFinal(addresses)
	if err != nil {
		r.problems = append(r.problems, "reading the final state: "+err.Error())
	}
	// The watcher must catch up with the last write within the bound.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && r.watcherLatest() != got.watched {
		time.Sleep(100 * time.Millisecond)
	}
	close(stopWatcher)
	waitGroup(&watcherDone, opTimeout+5*time.Second)
	for _, c := range r.clients {
		if c.workload == "pwriter" && err == nil {
			r.finalPersistentChange(c, 15*time.Second)
		}
	}
	if w := r.pwatcher.Swap(nil); w != nil {
		w.stop()
	}
	for _, c := range r.clients {
		c.conn.Close()
	}
	return r.report(got, err == nil)
}

func waitGroup(wg *sync.WaitGroup, bound time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(bound):
		return false
	}
}

func (r *run) watcherLatest() int64 {
	var latest op
	for _, o := range r.rec.snapshot() {
		if o.Workload == "watcher" && o.Outcome == ok && o.Call >= latest.Call {
			latest = o
		}
	}
	return latest.Value
}

func between(rng *rand.Rand, span [2]time.Duration) time.Duration {
	return span[0] + time.Duration(rng.Int63n(int64(span[1]-span[0])+1))
}

// injectFaults runs the profile's episodes: each injects one nemesis (sometimes two), holds it,
// heals it, and leaves a quiet spell.
func (r *run) injectFaults() {
	p := profiles[r.o.profile]
	count := p.episodes
	if r.o.episodes > 0 {
		count = r.o.episodes
	}
	f := &faults{c: r.c, rng: r.rng}
	all := f.nemeses()
	if r.o.only != "" {
		var kept []nemesis
		for _, n := range all {
			if strings.Contains(","+r.o.only+",", ","+n.name+",") {
				kept = append(kept, n)
			}
		}
		all = kept
	}
	if len(all) == 0 {
		r.problems = append(r.problems, "no nemesis named in -nemeses")
		return
	}
	order := r.rng.Perm(len(all))
	for k := 0; k < count; k++ {
		chosen := []nemesis{all[order[k%len(all)]]}
		if k%len(all) == len(all)-1 {
			order = r.rng.Perm(len(all))
		}
		if r.rng.Float64() < p.overlapChance {
			second := all[r.rng.Intn(len(all))]
			// Two faults that destroy a server's data could take two of three servers' data at
			// once: more than a cluster can lose (Warden then waits, safely, for an operator).
			if !(destroysData(chosen[0]) && destroysData(second)) {
				chosen = append(chosen, second)
			}
		}
		hold, quiet := between(r.rng, p.hold), between(r.rng, p.quiet)
		var active []*episode
		for _, n := range chosen {
			e := &episode{nemesis: n.name, start: time.Duration(r.rec.now())}
			if err := n.inject(e); err != nil {
				if errors.Is(err, errOverlap) {
					r.notes = append(r.notes, fmt.Sprintf("%v %s: not injected: %v", e.start.Round(time.Millisecond), n.name, err))
				} else {
					r.problems = append(r.problems, fmt.Sprintf("%s: injecting: %v", n.name, err))
				}
				continue
			}
			fmt.Printf("faults: %8v %-17s %s\n", e.start.Round(time.Millisecond), n.name, e.what)
			active = append(active, e)
			r.episodes = append(r.episodes, e)
		}
		time.Sleep(hold)
		for _, e := range active {
			if e.heal != nil {
				if err := e.heal(); err != nil {
					r.problems = append(r.problems, fmt.Sprintf("%s: healing: %v", e.nemesis, err))
				}
			}
			e.healed = time.Duration(r.rec.now())
		}
		time.Sleep(quiet)
		r.checkServersCameBack(active)
		for _, e := range active {
			e.end = time.Duration(r.rec.now())
		}
	}
	// Whatever is still broken is healed now.
	_ = r.c.net.heal()
	for i := range r.c.servers {
		_ = r.c.resume(i)
	}
}

// checkServersCameBack notes a server that exited after its restart. Warden must come back by
// itself from any of these faults: that is a failure. For ZooKeeper it is noted and the
// operator's step taken so the reference run goes on: the server is started again, and its
// data directory is removed first only when every other server is running (so that the data
// lives on a majority; removing two servers' data at once would lose acknowledged writes by
// the suite's own hand).
func (r *run) checkServersCameBack(active []*episode) {
	for i, s := range r.c.servers {
		if s.running() {
			continue
		}
		what := fmt.Sprintf("server.%d exited after %s; its log: %s", s.id, describe(active), lastLines(s.logPath(), 3))
		othersUp := true
		for j, other := range r.c.servers {
			othersUp = othersUp && (j == i || other.running())
		}
		switch {
		case r.c.system == systemWarden:
			r.problems = append(r.problems, what)
		case othersUp:
			r.notes = append(r.notes, what+" -- data directory removed and started again, as an operator would")
		default:
			r.notes = append(r.notes, what+" -- started again as it was (another server is down too)")
		}
		for _, e := range active {
			e.unhealthy = strings.TrimPrefix(strings.Join([]string{e.unhealthy, fmt.Sprintf("server.%d", s.id)}, " "), " ")
		}
		if r.c.system == systemZooKeeper && othersUp {
			if err := r.c.wipe(i); err != nil {
				r.notes = append(r.notes, "removing its data: "+err.Error())
			}
		}
		_ = r.c.start(i)
	}
}

func destroysData(n nemesis) bool { return n.name == "damage-data" || n.name == "wipe-data" }

func describe(episodes []*episode) string {
	var parts []string
	for _, e := range episodes {
		parts = append(parts, e.nemesis)
	}
	return strings.Join(parts, "+")
}

func lastLines(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// awaitRecovery waits until every server serves and every client has an ok operation invoked
// after `healed`, within recoveryBound.
func (r *run) awaitRecovery(healed int64) {
	deadline := time.Now().Add(recoveryBound)
	if err := r.c.waitServing(recoveryBound); err != nil {
		r.problems = append(r.problems, fmt.Sprintf("after healing: %v", err))
	}
	for time.Now().Before(deadline) {
		if len(r.stalled(healed)) == 0 {
			fmt.Printf("faults: every client made progress %v after the last heal\n",
				(time.Duration(r.rec.now()) - time.Duration(healed)).Round(time.Millisecond))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.problems = append(r.problems, fmt.Sprintf("no progress within %v of healing: %s", recoveryBound, strings.Join(r.stalled(healed), ", ")))
}

// stalled lists the clients with no ok operation invoked since `since` (the watcher waits for
// changes and the lock clients for each other, so they count any ok operation).
func (r *run) stalled(since int64) []string {
	progressed := map[string]bool{}
	for _, o := range r.rec.snapshot() {
		if o.Outcome == ok && o.Call >= since {
			progressed[o.Client] = true
		}
	}
	var out []string
	for _, c := range r.clients {
		if !progressed[c.name] && c.workload != "watcher" {
			out = append(out, c.name)
		}
	}
	sort.Strings(out)
	return out
}
