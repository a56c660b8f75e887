package main

// The history: every operation a client invoked, with its invocation and completion times and
// its outcome. An operation whose connection was lost or that timed out has an unknown outcome:
// it may or may not have taken effect, then or at any later time, and is never counted as failed.

import (
	"encoding/json"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

type outcome string

const (
	ok      outcome = "ok"
	failed  outcome = "failed"  // the server decided: no effect
	unknown outcome = "unknown" // connection lost or timed out: maybe an effect, maybe later
)

type op struct {
	Workload string  `json:"workload"`
	Client   string  `json:"client"`
	Process  int     `json:"process"` // a sequential actor; a new one after each unknown outcome
	Session  int64   `json:"session"`
	Kind     string  `json:"kind"`
	Key      string  `json:"key,omitempty"`
	Value    int64   `json:"value,omitempty"`   // written, added, enqueued or read
	Expect   int32   `json:"expect,omitempty"`  // cas: the version it expects
	Version  int32   `json:"version,omitempty"` // read or written version
	Name     string  `json:"name,omitempty"`    // a sequential node's name
	Call     int64   `json:"call"`              // ns since the run's start
	Return   int64   `json:"return"`            // ns since the run's start; unknown: when given up
	Outcome  outcome `json:"outcome"`
	Error    string  `json:"error,omitempty"`
}

type recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []op
	procs int
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) newProcess() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs++
	return r.procs - 1
}

func (r *recorder) add(o op) {
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]op(nil), r.ops...)
}

func (r *recorder) save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, o := range r.snapshot() {
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return nil
}

// classify turns a client error into an outcome. Only answers that ZooKeeper's semantics say
// leave the tree unchanged count as failed; anything the client library reports about the
// connection (lost, closed, expired, no server) is unknown.
func classify(err error) outcome {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode),
		errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNotEmpty),
		errors.Is(err, zk.ErrBadArguments):
		return failed
	default:
		return unknown
	}
}

// call runs f with a bound: past it the outcome is unknown and f is left to finish on its own.
func call[T any](timeout time.Duration, f func() (T, error)) (T, error) {
	type result struct {
		value T
		err   error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.value, r.err
	case <-time.After(timeout):
		var zero T
		return zero, errTimedOut
	}
}

var errTimedOut = errors.New("no answer within the operation timeout")
