package main

// The workloads, each a loop of one client until `stop` closes. Every value written, added or
// enqueued is unique in the run (`values`), so that a read names the write it saw.

import (
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

var values atomic.Int64

func nextValue() int64 { return values.Add(1) }

func encode(v int64) []byte { return []byte(strconv.FormatInt(v, 10)) }

func decode(b []byte) int64 {
	v, _ := strconv.ParseInt(string(b), 10, 64)
	return v
}

var acl = zk.WorldACL(zk.PermAll)

const (
	lockCounter = "/counter"
	watchedNode = "/watched"
)

// registerKeys is how many keys the register spreads over (the profile's): porcupine checks
// each key's history on its own, so more keys keep a long run's histories checkable.
var registerKeys = 4

func registerPath(key int) string { return fmt.Sprintf("/register/k%d", key) }

// prepare creates the nodes the workloads use (before any fault).
func prepare(c *client) error {
	nodes := []string{"/register", "/set", "/ids", "/queue", "/lock", lockCounter, watchedNode, pwatchRoot}
	for k := 0; k < registerKeys; k++ {
		nodes = append(nodes, registerPath(k))
	}
	for _, path := range nodes {
		if _, err := c.conn.Create(path, encode(0), 0, acl); err != nil && err != zk.ErrNodeExists {
			return fmt.Errorf("creating %s: %w", path, err)
		}
	}
	return nil
}

func pause(rng *rand.Rand, stop <-chan struct{}, min, max time.Duration) bool {
	select {
	case <-stop:
		return false
	case <-time.After(min + time.Duration(rng.Int63n(int64(max-min)+1))):
		return true
	}
}

// register: reads (plain, and sync + read), blind writes and compare-and-set (setData with the
// version last read) on a few keys.
func runRegister(c *client, rng *rand.Rand, stop <-chan struct{}) {
	known := map[int]int32{}
	for pause(rng, stop, 5*time.Millisecond, 30*time.Millisecond) {
		key := rng.Intn(registerKeys)
		path := registerPath(key)
		o := op{Key: path}
		switch p := rng.Intn(100); {
		case p < 25:
			o.Kind = "read"
			o = c.do(o, func(o *op) error {
				data, stat, err := c.conn.Get(path)
				if err == nil {
					o.Value, o.Version = decode(data), stat.Version
				}
				return err
			})
		case p < 50:
			o.Kind = "sync-read"
			o = c.do(o, func(o *op) error {
				if _, err := c.conn.Sync(path); err != nil {
					return err
				}
				data, stat, err := c.conn.Get(path)
				if err == nil {
					o.Value, o.Version = decode(data), stat.Version
				}
				return err
			})
		case p < 75:
			o.Kind, o.Value = "write", nextValue()
			o = c.do(o, func(o *op) error {
				stat, err := c.conn.Set(path, encode(o.Value), -1)
				if err == nil {
					o.Version = stat.Version
				}
				return err
			})
		default:
			o.Kind, o.Value, o.Expect = "cas", nextValue(), known[key]
			o = c.do(o, func(o *op) error {
				stat, err := c.conn.Set(path, encode(o.Value), o.Expect)
				if err == nil {
					o.Version = stat.Version
				}
				return err
			})
		}
		if o.Outcome == ok {
			known[key] = o.Version
		}
	}
}

// set: unique elements added as persistent nodes.
func runSet(c *client, rng *rand.Rand, stop <-chan struct{}) {
	for pause(rng, stop, 10*time.Millisecond, 40*time.Millisecond) {
		v := nextValue()
		c.do(op{Kind: "add", Value: v}, func(o *op) error {
			_, err := c.conn.Create(fmt.Sprintf("/set/e-%d", v), nil, 0, acl)
			return err
		})
	}
}

// ids: sequential creates, alone or inside a multi; each gets a name that must be unique.
func runIDs(c *client, rng *rand.Rand, stop <-chan struct{}) {
	for pause(rng, stop, 10*time.Millisecond, 40*time.Millisecond) {
		v := nextValue()
		if rng.Intn(2) == 0 {
			c.do(op{Kind: "create-seq", Value: v}, func(o *op) error {
				name, err := c.conn.Create("/ids/id-", encode(v), zk.FlagSequence, acl)
				o.Name = name
				return err
			})
			continue
		}
		c.do(op{Kind: "multi-create-seq", Value: v}, func(o *op) error {
			answers, err := c.conn.Multi(&zk.CreateRequest{Path: "/ids/id-", Data: encode(v), Acl: acl, Flags: zk.FlagSequence})
			if err == nil && len(answers) == 1 {
				o.Name = answers[0].String
			}
			return err
		})
	}
}

// queue producer: sequential nodes carrying unique values.
func runProducer(c *client, rng *rand.Rand, stop <-chan struct{}) {
	for pause(rng, stop, 20*time.Millisecond, 60*time.Millisecond) {
		v := nextValue()
		c.do(op{Kind: "enqueue", Value: v}, func(o *op) error {
			name, err := c.conn.Create("/queue/q-", encode(v), zk.FlagSequence, acl)
			o.Name = name
			return err
		})
	}
}

// queue consumer: the smallest node is read, then deleted; a delete that succeeds consumed it.
func runConsumer(c *client, rng *rand.Rand, stop <-chan struct{}) {
	for pause(rng, stop, 10*time.Millisecond, 40*time.Millisecond) {
		var children []string
		listed := c.do(op{Kind: "list", Key: "/queue"}, func(o *op) error {
			var err error
			children, _, err = c.conn.Children("/queue")
			return err
		})
		if listed.Outcome != ok || len(children) == 0 {
			continue
		}
		sort.Strings(children)
		for _, child := range children[:min(3, len(children))] {
			path := "/queue/" + child
			read := c.do(op{Kind: "peek", Name: path}, func(o *op) error {
				data, _, err := c.conn.Get(path)
				o.Value = decode(data)
				return err
			})
			if read.Outcome != ok {
				continue
			}
			taken := c.do(op{Kind: "dequeue", Name: path, Value: read.Value}, func(o *op) error {
				return c.conn.Delete(path, -1)
			})
			if taken.Outcome != failed {
				break
			}
		}
	}
}

// lock: kazoo's and Curator's lock protocol (an ephemeral sequential node; the smallest holds
// the lock; the others watch the node before theirs). The holder increments /counter by a read
// and a blind write: if two ever held the lock at once, an increment would be lost.
func runLock(c *client, rng *rand.Rand, stop <-chan struct{}) {
	for pause(rng, stop, 10*time.Millisecond, 50*time.Millisecond) {
		session := c.conn.SessionID()
		created := c.do(op{Kind: "lock-create"}, func(o *op) error {
			name, err := c.conn.Create("/lock/n-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
			o.Name = name
			return err
		})
		if created.Outcome != ok {
			// An unknown create may leave a node of this session behind: start a new session so
			// that it goes with the old one and cannot block the lock forever.
			c.renew()
			continue
		}
		mine := strings.TrimPrefix(created.Name, "/lock/")
		if !c.acquire(mine, session, stop) {
			c.renew()
			continue
		}
		acquired := c.rec.now()
		var counter int64
		read := c.do(op{Kind: "counter-read", Name: created.Name}, func(o *op) error {
			data, _, err := c.conn.Get(lockCounter)
			counter = decode(data)
			o.Value = counter
			return err
		})
		if read.Outcome == ok {
			c.do(op{Kind: "counter-write", Name: created.Name, Value: counter + 1}, func(o *op) error {
				_, err := c.conn.Set(lockCounter, encode(counter+1), -1)
				return err
			})
		}
		released := c.do(op{Kind: "unlock", Name: created.Name, Value: acquired}, func(o *op) error {
			return c.conn.Delete(created.Name, -1)
		})
		if released.Outcome != ok || c.conn.SessionID() != session {
			c.renew()
		}
	}
}

// acquire waits until `mine` is the smallest child of /lock. It gives up (false) on any error,
// on a new session, or when the node has gone; the last with the same session is a violation.
func (c *client) acquire(mine string, session int64, stop <-chan struct{}) bool {
	deadline := time.Now().Add(4 * sessionTimeout)
	for time.Now().Before(deadline) {
		var children []string
		listed := c.do(op{Kind: "lock-list", Name: "/lock/" + mine}, func(o *op) error {
			var err error
			children, _, err = c.conn.Children("/lock")
			return err
		})
		if listed.Outcome != ok || c.conn.SessionID() != session || c.expired.Load() > 0 {
			return false
		}
		sort.Strings(children)
		position := sort.SearchStrings(children, mine)
		if position == len(children) || children[position] != mine {
			c.do(op{Kind: "lock-vanished", Name: "/lock/" + mine, Session: session}, func(o *op) error { return nil })
			return false
		}
		if position == 0 {
			c.do(op{Kind: "lock-acquired", Name: "/lock/" + mine}, func(o *op) error { return nil })
			return true
		}
		before := "/lock/" + children[position-1]
		exists, _, events, err := c.conn.ExistsW(before)
		if err != nil {
			return false
		}
		if exists {
			select {
			case <-events:
			case <-stop:
				return false
			case <-time.After(2 * sessionTimeout):
			}
		}
	}
	return false
}

// watcher: a data watch on /watched, set again after every event; the versions it reads after
// each notification must never go back, and it must see the last write once writes stop.
func runWatcher(c *client, rng *rand.Rand, stop <-chan struct{}) {
	for {
		var events <-chan zk.Event
		read := c.do(op{Kind: "watch-read", Key: watchedNode}, func(o *op) error {
			data, stat, ch, err := c.conn.GetW(watchedNode)
			if err == nil {
				o.Value, o.Version, events = decode(data), stat.Version, ch
			}
			return err
		})
		if read.Outcome != ok {
			if !pause(rng, stop, 50*time.Millisecond, 100*time.Millisecond) {
				return
			}
			continue
		}
		select {
		case <-events:
		case <-stop:
			return
		case <-time.After(opTimeout):
		}
	}
}

// watched writer: blind writes to /watched.
func runWatchedWriter(c *client, rng *rand.Rand, stop <-chan struct{}) {
	for pause(rng, stop, 20*time.Millisecond, 60*time.Millisecond) {
		v := nextValue()
		c.do(op{Kind: "write", Key: watchedNode, Value: v}, func(o *op) error {
			stat, err := c.conn.Set(watchedNode, encode(v), -1)
			if err == nil {
				o.Version = stat.Version
			}
			return err
		})
	}
}
