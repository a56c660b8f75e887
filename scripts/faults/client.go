package main

// One ZooKeeper session of the real go-zookeeper client, pinned to start at a given server and
// moving on to the others in order when its server fails, so that sessions spread over all
// servers.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

const (
	sessionTimeout = 6 * time.Second
	opTimeout      = 8 * time.Second
)

// ordered is a zk.HostProvider that tries the servers in the order given, from the first.
type ordered struct {
	mu      sync.Mutex
	servers []string
	curr    int
	last    int
}

func (o *ordered) Init(servers []string) error {
	o.servers, o.curr, o.last = servers, -1, -1
	return nil
}

func (o *ordered) Len() int { return len(o.servers) }

func (o *ordered) Next() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.curr = (o.curr + 1) % len(o.servers)
	retryStart := o.curr == o.last
	if o.last == -1 {
		o.last = 0
	}
	return o.servers[o.curr], retryStart
}

func (o *ordered) Connected() {
	o.mu.Lock()
	o.last = o.curr
	o.mu.Unlock()
}

type quiet struct{}

func (quiet) Printf(string, ...interface{}) {}

// client is one worker's session and its place in the history.
type client struct {
	name     string
	workload string
	rec      *recorder
	process  int
	// Where the session connects first, and the others in order.
	addresses []string
	conn      *zk.Conn
	expired   *atomic.Int32 // StateExpired events seen by this session
	lastOK    atomic.Int64  // Return time of the latest ok operation
}

func connect(rec *recorder, name, workload string, addresses []string, first int) (*client, error) {
	order := append(append([]string(nil), addresses[first:]...), addresses[:first]...)
	c := &client{name: name, workload: workload, rec: rec, process: rec.newProcess(), addresses: order}
	return c, c.open()
}

// open starts a new session.
func (c *client) open() error {
	conn, events, err := zk.Connect(c.addresses, sessionTimeout, zk.WithHostProvider(&ordered{}), zk.WithLogger(quiet{}))
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	expired := &atomic.Int32{}
	c.conn, c.expired = conn, expired
	go func() {
		for event := range events {
			if event.State == zk.StateExpired {
				expired.Add(1)
			}
		}
	}()
	return nil
}

// renew ends the session (its ephemeral nodes go with it) and opens a new one.
func (c *client) renew() {
	c.conn.Close()
	if err := c.open(); err != nil {
		c.rec.add(op{Workload: c.workload, Kind: "reconnect", Outcome: unknown, Error: err.Error()})
	}
}

// do runs one operation with the operation timeout and records it; f sets the fields of its
// copy of the operation that the answer gives. It returns the recorded operation.
func (c *client) do(o op, f func(o *op) error) op {
	o.Workload, o.Client, o.Process = c.workload, c.name, c.process
	o.Call = c.rec.now()
	answered, err := call(opTimeout, func() (op, error) {
		mine := o
		err := f(&mine)
		return mine, err
	})
	if err != errTimedOut {
		o = answered
	}
	o.Return = c.rec.now()
	// The session that answered (0 while none is established; the per-session checks skip it).
	o.Session = c.conn.SessionID()
	o.Outcome = classify(err)
	if err != nil {
		o.Error = err.Error()
	}
	if o.Outcome == unknown {
		c.process = c.rec.newProcess()
	}
	if o.Outcome == ok {
		c.lastOK.Store(o.Return)
	}
	c.rec.add(o)
	return o
}
