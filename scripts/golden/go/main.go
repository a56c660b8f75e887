// Golden-vector driver for go-zookeeper (github.com/go-zookeeper/zk v1.0.4), run through
// scripts/golden/capture_proxy.py by scripts/golden/capture.sh.
//
// go-zookeeper's ConnectRequest has no trailing readOnly byte (44 bytes instead of 45), so these
// files show the "short handshake" and the server's answer to it. It also sends auth with an
// ordinary positive xid (not -4) and re-sends watches with setWatches (101) after a reconnect.
//
// Every step states the outcome it expects; any other outcome exits with status 1.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

var (
	proxyAddr   = flag.String("proxy", "", "capture proxy host:port")
	directAddr  = flag.String("direct", "", "ZooKeeper host:port (unrecorded helper connection)")
	controlPort = flag.Int("control", 0, "capture proxy control port")
)

const waitFor = 15 * time.Second

// ---------------------------------------------------------------- proxy control
type control struct {
	mu sync.Mutex
	c  net.Conn
	r  *bufio.Reader
}

func newControl(port int) *control {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
	if err != nil {
		log.Fatalf("control: %v", err)
	}
	return &control{c: c, r: bufio.NewReader(c)}
}

func (k *control) cmd(line string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	line = strings.NewReplacer("\n", " ", "\r", " ").Replace(line)
	k.c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := fmt.Fprintf(k.c, "%s\n", line); err != nil {
		log.Fatalf("control write: %v", err)
	}
	resp, err := k.r.ReadString('\n')
	if err != nil || !strings.HasPrefix(resp, "OK") {
		log.Fatalf("control: %q -> %q %v", line, resp, err)
	}
	return strings.TrimSpace(resp)
}

// ---------------------------------------------------------------- driver
type driver struct {
	ctl *control
}

func (d *driver) comment(s string) {
	fmt.Println("  " + s)
	d.ctl.cmd("COMMENT " + s)
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	os.Exit(1)
}

// step runs f, checks its error against want (nil = success expected), records the outcome.
func (d *driver) step(desc string, want error, f func() (interface{}, error)) interface{} {
	d.comment("step: " + desc)
	v, err := f()
	if want == nil && err != nil {
		fail("%s: unexpected error %v", desc, err)
	}
	if want != nil && !errors.Is(err, want) {
		fail("%s: got %v, want %v", desc, err, want)
	}
	if err != nil {
		d.comment("result: error " + err.Error())
	} else {
		d.comment("result: " + show(v))
	}
	return v
}

func show(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "ok"
	case *zk.Stat:
		return fmt.Sprintf("Stat{czxid=%#x mzxid=%#x version=%d cversion=%d aversion=%d ephemeralOwner=%#x dataLength=%d numChildren=%d pzxid=%#x}",
			x.Czxid, x.Mzxid, x.Version, x.Cversion, x.Aversion, x.EphemeralOwner, x.DataLength, x.NumChildren, x.Pzxid)
	case []byte:
		return fmt.Sprintf("data=%q", string(x))
	case []string:
		s := append([]string(nil), x...)
		sort.Strings(s)
		return fmt.Sprintf("%v", s)
	case []zk.MultiResponse:
		parts := []string{}
		for _, r := range x {
			if r.Error != nil {
				parts = append(parts, "error("+r.Error.Error()+")")
			} else if r.Stat != nil {
				parts = append(parts, show(r.Stat))
			} else {
				parts = append(parts, fmt.Sprintf("%q", r.String))
			}
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		return fmt.Sprintf("%v", v)
	}
}

type session struct {
	conn   *zk.Conn
	states chan zk.State
}

func (d *driver) open(addr string, timeout time.Duration) *session {
	conn, ch, err := zk.Connect([]string{addr}, timeout, zk.WithLogInfo(false))
	if err != nil {
		fail("connect: %v", err)
	}
	s := &session{conn: conn, states: make(chan zk.State, 64)}
	go func() {
		for ev := range ch {
			if ev.Type == zk.EventSession {
				select {
				case s.states <- ev.State:
				default:
				}
			}
		}
	}()
	s.await(zk.StateHasSession)
	return s
}

func (s *session) await(want zk.State) {
	deadline := time.After(waitFor)
	for {
		select {
		case st := <-s.states:
			if st == want {
				return
			}
		case <-deadline:
			fail("state %v not reached", want)
		}
	}
}

func (d *driver) event(ch <-chan zk.Event, want zk.EventType, path string) {
	select {
	case ev := <-ch:
		if ev.Type != want || ev.Path != path {
			fail("event %v %s, want %v %s", ev.Type, ev.Path, want, path)
		}
		d.comment(fmt.Sprintf("event: %v %s", ev.Type, ev.Path))
	case <-time.After(waitFor):
		fail("no %v event for %s", want, path)
	}
}

var open = zk.WorldACL(zk.PermAll)

func (d *driver) scenario(name string, description ...string) {
	fmt.Println("== " + name)
	d.ctl.cmd("SCENARIO " + name)
	d.comment("client: go-zookeeper github.com/go-zookeeper/zk v1.0.4 (ConnectRequest without the readOnly byte)")
	for _, l := range description {
		d.comment(l)
	}
}

func (d *driver) end() {
	d.ctl.cmd("WAIT_CLOSED 15")
	d.ctl.cmd("END")
}

func (d *driver) shortHandshake() {
	d.scenario("go_short_handshake",
		"scenario: the 44-byte ConnectRequest (no readOnly byte) and the server's 36-byte ConnectResponse (no readOnly",
		"byte either: ZooKeeper answers in the shape the client used), then a few ops; auth goes with a normal xid")
	d.comment("connect: sessionTimeout=10s")
	s := d.open(*proxyAddr, 10*time.Second)
	c := s.conn
	d.comment(fmt.Sprintf("connected: sessionId=%#x", c.SessionID()))
	d.step("create /go data=\"hello\"", nil, func() (interface{}, error) { return c.Create("/go", []byte("hello"), 0, open) })
	d.step("get /go", nil, func() (interface{}, error) {
		b, st, err := c.Get("/go")
		return show(b) + " " + show(st), err
	})
	d.step("set /go \"world\" version=0", nil, func() (interface{}, error) { return c.Set("/go", []byte("world"), 0) })
	d.step("set /go version=0 again -> BadVersion", zk.ErrBadVersion, func() (interface{}, error) { return c.Set("/go", []byte("x"), 0) })
	d.step("create /go/e- ephemeral sequential (flags 3)", nil, func() (interface{}, error) {
		return c.Create("/go/e-", nil, zk.FlagEphemeral|zk.FlagSequence, open)
	})
	d.step("createContainer /go/c (opcode 19; go-zookeeper reads only the path)", nil, func() (interface{}, error) {
		return c.CreateContainer("/go/c", []byte("c"), zk.FlagContainer, open)
	})
	d.step("createTTL /go/ttl ttl=60s (opcode 21)", nil, func() (interface{}, error) {
		return c.CreateTTL("/go/ttl", []byte(""), zk.FlagTTL, open, 60*time.Second)
	})
	d.step("children /go (getChildren2, opcode 12)", nil, func() (interface{}, error) {
		ch, st, err := c.Children("/go")
		return show(ch) + " " + show(st), err
	})
	d.step("exists /go (hit)", nil, func() (interface{}, error) {
		ok, st, err := c.Exists("/go")
		return fmt.Sprintf("%v %s", ok, show(st)), err
	})
	d.step("exists /go/missing (miss)", nil, func() (interface{}, error) {
		ok, _, err := c.Exists("/go/missing")
		return ok, err
	})
	var ch <-chan zk.Event
	d.step("existsW /go/w (miss, sets a watch)", nil, func() (interface{}, error) {
		ok, _, w, err := c.ExistsW("/go/w")
		ch = w
		return ok, err
	})
	d.step("create /go/w (fires NodeCreated)", nil, func() (interface{}, error) { return c.Create("/go/w", nil, 0, open) })
	d.event(ch, zk.EventNodeCreated, "/go/w")
	d.step("getW /go/w", nil, func() (interface{}, error) {
		b, _, w, err := c.GetW("/go/w")
		ch = w
		return b, err
	})
	d.step("set /go/w (fires NodeDataChanged)", nil, func() (interface{}, error) { return c.Set("/go/w", []byte("1"), -1) })
	d.event(ch, zk.EventNodeDataChanged, "/go/w")
	d.step("sync /go", nil, func() (interface{}, error) { return c.Sync("/go") })
	d.step("addAuth digest gopher:pw (go-zookeeper uses a normal xid, not -4)", nil, func() (interface{}, error) {
		return nil, c.AddAuth("digest", []byte("gopher:pw"))
	})
	d.step("create /go/acl with [auth ALL]", nil, func() (interface{}, error) {
		return c.Create("/go/acl", nil, 0, zk.AuthACL(zk.PermAll))
	})
	d.step("getACL /go/acl", nil, func() (interface{}, error) {
		acl, st, err := c.GetACL("/go/acl")
		return fmt.Sprintf("%v %s", acl, show(st)), err
	})
	d.step("setACL /go/acl [digest gopher READ, world READ] version=0", nil, func() (interface{}, error) {
		return c.SetACL("/go/acl", append(zk.DigestACL(zk.PermRead, "gopher", "pw"), zk.WorldACL(zk.PermRead)...), 0)
	})
	d.step("multi [create /go/m, setData /go/m, check /go/m v1, delete /go/m]", nil, func() (interface{}, error) {
		return c.Multi(
			&zk.CreateRequest{Path: "/go/m", Data: []byte("m"), Acl: open},
			&zk.SetDataRequest{Path: "/go/m", Data: []byte("m1"), Version: 0},
			&zk.CheckVersionRequest{Path: "/go/m", Version: 1},
			&zk.DeleteRequest{Path: "/go/m", Version: -1})
	})
	d.step("failing multi [create /go/m2, delete /go/missing]", zk.ErrNoNode, func() (interface{}, error) {
		return c.Multi(
			&zk.CreateRequest{Path: "/go/m2", Data: nil, Acl: open},
			&zk.DeleteRequest{Path: "/go/missing", Version: -1})
	})
	d.step("delete /go -> NotEmpty", zk.ErrNotEmpty, func() (interface{}, error) { return nil, c.Delete("/go", -1) })
	d.step("delete /go/w", nil, func() (interface{}, error) { return nil, c.Delete("/go/w", -1) })
	d.comment("step: close (closeSession)")
	c.Close()
	d.end()
}

func (d *driver) reconnect() {
	d.scenario("go_reconnect",
		"scenario: watches and auth held across a connection cut: go-zookeeper reconnects with the short",
		"ConnectRequest carrying its sessionId/passwd/lastZxidSeen, re-sends auth (normal xid) and setWatches (101)")
	d.comment("connect: sessionTimeout=10s")
	s := d.open(*proxyAddr, 10*time.Second)
	c := s.conn
	d.comment(fmt.Sprintf("connected: sessionId=%#x", c.SessionID()))
	other := d.open(*directAddr, 10*time.Second)
	d.step("addAuth digest gopher:pw", nil, func() (interface{}, error) { return nil, c.AddAuth("digest", []byte("gopher:pw")) })
	d.step("create /goreco", nil, func() (interface{}, error) { return c.Create("/goreco", nil, 0, open) })
	d.step("create /goreco/a", nil, func() (interface{}, error) { return c.Create("/goreco/a", []byte("a"), 0, open) })
	var dataW, childW, existW <-chan zk.Event
	d.step("getW /goreco/a", nil, func() (interface{}, error) {
		b, _, w, err := c.GetW("/goreco/a")
		dataW = w
		return b, err
	})
	d.step("childrenW /goreco", nil, func() (interface{}, error) {
		ch, _, w, err := c.ChildrenW("/goreco")
		childW = w
		return ch, err
	})
	d.step("existsW /goreco/new (miss)", nil, func() (interface{}, error) {
		ok, _, w, err := c.ExistsW("/goreco/new")
		existW = w
		return ok, err
	})
	d.comment("proxy: PAUSE, CUT; another client (not recorded) sets /goreco/a and creates /goreco/new; RESUME")
	d.ctl.cmd("PAUSE")
	d.ctl.cmd("CUT")
	s.await(zk.StateDisconnected)
	if _, err := other.conn.Set("/goreco/a", []byte("changed"), -1); err != nil {
		fail("other set: %v", err)
	}
	if _, err := other.conn.Create("/goreco/new", nil, 0, open); err != nil {
		fail("other create: %v", err)
	}
	d.ctl.cmd("RESUME")
	s.await(zk.StateHasSession)
	d.comment("reconnected")
	d.event(dataW, zk.EventNodeDataChanged, "/goreco/a")
	d.event(existW, zk.EventNodeCreated, "/goreco/new")
	d.event(childW, zk.EventNodeChildrenChanged, "/goreco")
	d.step("get /goreco/a", nil, func() (interface{}, error) {
		b, _, err := c.Get("/goreco/a")
		return b, err
	})
	d.comment("step: close (closeSession)")
	c.Close()
	other.conn.Close()
	d.end()
}

func main() {
	flag.Parse()
	if *proxyAddr == "" || *directAddr == "" || *controlPort == 0 {
		flag.Usage()
		os.Exit(2)
	}
	d := &driver{ctl: newControl(*controlPort)}
	d.shortHandshake()
	d.reconnect()
}
