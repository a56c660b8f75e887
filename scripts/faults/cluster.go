package main

// The servers under test: real `warden server` or Apache ZooKeeper 3.9.5 processes, one per
// network namespace, each from its own unmodified zoo.cfg and myid. Every process is signalled
// by the PID the suite started; `ip netns exec` execs the server, so that PID is the server's.

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

const (
	clientPort   = 2181
	quorumPort   = 2888
	electionPort = 3888
	tickMs       = 500
)

// errOverlap: a fault cannot act on a server that another fault of the same episode took.
var errOverlap = errors.New("another fault of this episode holds it")

type system string

const (
	systemWarden    system = "warden"
	systemZooKeeper system = "zookeeper"
)

type server struct {
	id      int // myid, 1-based
	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool // SIGSTOPped
}

type cluster struct {
	system    system
	binary    string // warden binary, or scripts/zookeeper/run.sh
	net       *network
	root      string
	servers   []*server
	extraConf string
}

func newCluster(sys system, binary string, nw *network, root string, size int, extraConf string) (*cluster, error) {
	c := &cluster{system: sys, binary: binary, net: nw, root: root, extraConf: extraConf}
	for i := 0; i < size; i++ {
		s := &server{id: i + 1, dir: filepath.Join(root, fmt.Sprintf("server%d", i+1))}
		if err := os.MkdirAll(s.dataDir(), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(s.dataDir(), "myid"), []byte(fmt.Sprintf("%d\n", s.id)), 0o644); err != nil {
			return nil, err
		}
		c.servers = append(c.servers, s)
	}
	for i, s := range c.servers {
		if err := os.WriteFile(s.cfgPath(), []byte(c.zooCfg(i)), 0o644); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (s *server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *server) cfgPath() string { return filepath.Join(s.dir, "zoo.cfg") }
func (s *server) logPath() string { return filepath.Join(s.dir, "server.log") }

func (s *server) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// zooCfg is server i's zoo.cfg: the same for every server and both systems but for the address
// it serves clients on.
func (c *cluster) zooCfg(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\ninitLimit=10\nsyncLimit=5\ndataDir=%s\n", tickMs, c.servers[i].dataDir())
	fmt.Fprintf(&b, "clientPort=%d\nclientPortAddress=%s\n", clientPort, c.net.address(i))
	b.WriteString("4lw.commands.whitelist=*\nmaxClientCnxns=0\nautopurge.snapRetainCount=3\n")
	// Small enough that the faults in a short run cross snapshots and log rolls.
	b.WriteString("snapCount=2000\n")
	for j := range c.servers {
		fmt.Fprintf(&b, "server.%d=%s:%d:%d\n", j+1, c.net.address(j), quorumPort, electionPort)
	}
	b.WriteString(c.extraConf)
	return b.String()
}

func (c *cluster) clientAddress(i int) string {
	return net.JoinHostPort(c.net.address(i), fmt.Sprint(clientPort))
}

func (c *cluster) start(i int) error {
	s := c.servers[i]
	if s.running() {
		// Two overlapping faults that both restart it: the first did.
		return nil
	}
	log, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	var args []string
	switch c.system {
	case systemWarden:
		args = []string{"netns", "exec", c.net.names[i], c.binary, "server", "--zoo-cfg", s.cfgPath()}
	case systemZooKeeper:
		args = []string{"netns", "exec", c.net.names[i], c.binary, s.cfgPath()}
	}
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = log, log
	// raft-log logs a line per fsync at info once its first file is full: warn, as by default.
	cmd.Env = append(os.Environ(), "WARDEN_LOG=info,raft_log=warn,chunked_wal=warn", "ZK_HEAP=512m")
	// Its own process group: a ^C to the suite does not reach the servers before teardown.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.exited, s.stopped = cmd, make(chan struct{}), false
	exited := s.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	return nil
}

// kill sends SIGKILL to server i (SIGCONT first if stopped) and waits for it to exit.
func (c *cluster) kill(i int) error {
	s := c.servers[i]
	if !s.running() {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("server.%d (pid %d) did not exit 10 s after SIGKILL", s.id, s.cmd.Process.Pid)
	}
	s.stopped = false
	return nil
}

func (c *cluster) pause(i int) error {
	s := c.servers[i]
	if !s.running() {
		return fmt.Errorf("server.%d is not running: %w", s.id, errOverlap)
	}
	s.stopped = true
	return s.cmd.Process.Signal(syscall.SIGSTOP)
}

func (c *cluster) resume(i int) error {
	s := c.servers[i]
	if !s.running() || !s.stopped {
		return nil
	}
	s.stopped = false
	return s.cmd.Process.Signal(syscall.SIGCONT)
}

func (c *cluster) killAll() {
	for i := range c.servers {
		if err := c.kill(i); err != nil {
			fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		}
	}
}

// fourLetter sends a four-letter word to server i and returns its answer ("" if none).
func (c *cluster) fourLetter(i int, word string) string {
	conn, err := net.DialTimeout("tcp", c.clientAddress(i), time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(word)); err != nil {
		return ""
	}
	var b strings.Builder
	scanner := bufio.NewScanner(conn)
	for scanner.Scan() {
		b.WriteString(scanner.Text())
		b.WriteByte('\n')
	}
	return b.String()
}

// mode is server i's `Mode:` line from srvr ("leader", "follower", ...), or "" if it does not
// answer or is not serving.
func (c *cluster) mode(i int) string {
	if c.servers[i].stopped || !c.servers[i].running() {
		return ""
	}
	for _, line := range strings.Split(c.fourLetter(i, "srvr"), "\n") {
		if rest, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// leader is the index of the server that says it leads, or -1.
func (c *cluster) leader() int {
	for i := range c.servers {
		if c.mode(i) == "leader" {
			return i
		}
	}
	return -1
}

// waitServing waits until every running, unpaused server answers srvr with a mode and one leads.
func (c *cluster) waitServing(bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		serving, leaders := 0, 0
		expected := 0
		for i, s := range c.servers {
			if !s.running() || s.stopped {
				continue
			}
			expected++
			switch c.mode(i) {
			case "leader":
				leaders++
				serving++
			case "follower", "observer":
				serving++
			}
		}
		if expected > 0 && serving == expected && leaders == 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d running servers serving, %d leader(s), after %v", serving, expected, leaders, bound)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// damage flips bytes in the newest file of server i's transaction log or snapshots (the server
// must be stopped). It returns what it changed, for the report.
func (c *cluster) damage(i int, rng *rand.Rand) (string, error) {
	s := c.servers[i]
	if s.running() {
		return "", fmt.Errorf("server.%d is running: %w", s.id, errOverlap)
	}
	// The newest file of each kind (Warden: the log segment and the snapshot; ZooKeeper: log.*
	// and snapshot.*): the records a restart must read.
	newest := map[string]string{}
	modified := map[string]time.Time{}
	err := filepath.Walk(s.dataDir(), func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if info.IsDir() && strings.Contains(info.Name(), ".damaged-") {
			// What Warden moved aside after an earlier damage: it never reads it again.
			return filepath.SkipDir
		}
		if info.IsDir() || info.Size() < 64 {
			return nil
		}
		name := filepath.Base(path)
		kind := filepath.Join(filepath.Dir(path), name[:strings.IndexAny(name+".", ".-")])
		if t, seen := modified[kind]; !seen || info.ModTime().After(t) {
			newest[kind], modified[kind] = path, info.ModTime()
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(newest) == 0 {
		return "nothing to damage", nil
	}
	var files []string
	for _, path := range newest {
		files = append(files, path)
	}
	sort.Strings(files)
	target := files[rng.Intn(len(files))]
	f, err := os.OpenFile(target, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	// A byte in the last quarter of what was written (ZooKeeper preallocates its log files
	// with zeros): the most recent records, which the server must notice.
	used, err := writtenLength(f, info.Size())
	if err != nil {
		return "", err
	}
	offset := used - 1 - rng.Int63n(used/4+1)
	buf := []byte{0}
	if _, err := f.ReadAt(buf, offset); err != nil {
		return "", err
	}
	buf[0] ^= 0xff
	if _, err := f.WriteAt(buf, offset); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	rel, _ := filepath.Rel(s.dir, target)
	return fmt.Sprintf("byte %d of %s (%d bytes)", offset, rel, info.Size()), nil
}

// wipe removes server i's data directory but its myid (the server must be stopped).
func (c *cluster) wipe(i int) error {
	s := c.servers[i]
	if s.running() {
		return fmt.Errorf("server.%d is running: %w", s.id, errOverlap)
	}
	if err := os.RemoveAll(s.dataDir()); err != nil {
		return err
	}
	if err := os.MkdirAll(s.dataDir(), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dataDir(), "myid"), []byte(fmt.Sprintf("%d\n", s.id)), 0o644)
}

// writtenLength is the file's length without its trailing zeros.
func writtenLength(f *os.File, size int64) (int64, error) {
	block := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(0, end-int64(len(block)))
		n, err := f.ReadAt(block[:end-start], start)
		if err != nil && n < int(end-start) {
			return 0, err
		}
		for i := n - 1; i >= 0; i-- {
			if block[i] != 0 {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return size, nil
}
