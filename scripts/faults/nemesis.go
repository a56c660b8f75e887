package main

// The faults. The seed fixes the order of the nemeses, their durations and the servers they
// pick by position; "the leader" is whichever server says so when the fault starts.

import (
	"fmt"
	"math/rand"
	"strings"
	"time"
)

type nemesis struct {
	name string
	// inject starts the fault and says what it did; heal ends it.
	inject func(e *episode) error
}

type episode struct {
	nemesis   string
	what      string
	start     time.Duration // since the run's start
	healed    time.Duration
	end       time.Duration // when the next episode starts (or the run's last heal)
	heal      func() error
	unhealthy string // servers that did not come back by themselves
}

type faults struct {
	c     *cluster
	rng   *rand.Rand
	start time.Time
}

func (f *faults) pickOne() int { return f.rng.Intn(len(f.c.servers)) }

func (f *faults) leaderOr() int {
	if l := f.c.leader(); l >= 0 {
		return l
	}
	return f.pickOne()
}

// others lists every server but those given, in order.
func (f *faults) others(not ...int) []int {
	var out []int
	for i := range f.c.servers {
		skip := false
		for _, n := range not {
			skip = skip || n == i
		}
		if !skip {
			out = append(out, i)
		}
	}
	return out
}

func names(servers []int) string {
	var parts []string
	for _, s := range servers {
		parts = append(parts, fmt.Sprintf("server.%d", s+1))
	}
	return strings.Join(parts, ",")
}

func (f *faults) killAndRestart(e *episode, victims []int, what string) error {
	for _, v := range victims {
		if err := f.c.kill(v); err != nil {
			return err
		}
	}
	e.what = fmt.Sprintf("kill -9 %s (%s)", names(victims), what)
	e.heal = func() error {
		for _, v := range victims {
			if err := f.c.start(v); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

func (f *faults) pauseAndResume(e *episode, victim int, what string) error {
	if err := f.c.pause(victim); err != nil {
		return err
	}
	e.what = fmt.Sprintf("SIGSTOP server.%d (%s)", victim+1, what)
	e.heal = func() error { return f.c.resume(victim) }
	return nil
}

// isolate cuts every link between the servers of `side` and the rest.
func (f *faults) isolate(e *episode, side []int, what string) error {
	for _, a := range side {
		for _, b := range f.others(side...) {
			if err := f.c.net.cut(a, b); err != nil {
				return err
			}
		}
	}
	e.what = fmt.Sprintf("partition %s | %s (%s)", names(side), names(f.others(side...)), what)
	e.heal = f.c.net.heal
	return nil
}

func (f *faults) nemeses() []nemesis {
	n := len(f.c.servers)
	return []nemesis{
		{"kill-one", func(e *episode) error { return f.killAndRestart(e, []int{f.pickOne()}, "one server") }},
		{"kill-leader", func(e *episode) error { return f.killAndRestart(e, []int{f.leaderOr()}, "the leader") }},
		{"kill-majority", func(e *episode) error {
			return f.killAndRestart(e, f.rng.Perm(n)[:n/2+1], "a majority")
		}},
		{"kill-all", func(e *episode) error { return f.killAndRestart(e, f.others(), "every server") }},
		{"pause-one", func(e *episode) error { return f.pauseAndResume(e, f.pickOne(), "one server") }},
		{"pause-leader", func(e *episode) error { return f.pauseAndResume(e, f.leaderOr(), "the leader") }},
		{"partition-one", func(e *episode) error { return f.isolate(e, []int{f.pickOne()}, "one server alone") }},
		{"partition-leader", func(e *episode) error { return f.isolate(e, []int{f.leaderOr()}, "the leader alone") }},
		{"partition-halves", func(e *episode) error {
			return f.isolate(e, f.rng.Perm(n)[:n/2], "a minority from a majority")
		}},
		{"partition-bridge", func(e *episode) error {
			// Two halves that share one server: each half reaches the bridge, not the other half.
			order := f.rng.Perm(n)
			bridge, left, right := order[0], order[1:1+(n-1)/2], order[1+(n-1)/2:]
			for _, a := range left {
				for _, b := range right {
					if err := f.c.net.cut(a, b); err != nil {
						return err
					}
				}
			}
			e.what = fmt.Sprintf("bridge %s | server.%d | %s", names(left), bridge+1, names(right))
			e.heal = f.c.net.heal
			return nil
		}},
		{"damage-data", func(e *episode) error {
			victim := f.pickOne()
			if err := f.c.kill(victim); err != nil {
				return err
			}
			changed, err := f.c.damage(victim, f.rng)
			if err != nil {
				return err
			}
			e.what = fmt.Sprintf("kill -9 server.%d, then flip %s", victim+1, changed)
			e.heal = func() error { return f.c.start(victim) }
			return nil
		}},
		{"wipe-data", func(e *episode) error {
			victim := f.pickOne()
			if err := f.c.kill(victim); err != nil {
				return err
			}
			if err := f.c.wipe(victim); err != nil {
				return err
			}
			e.what = fmt.Sprintf("kill -9 server.%d, remove its data directory (myid kept)", victim+1)
			e.heal = func() error { return f.c.start(victim) }
			return nil
		}},
	}
}
