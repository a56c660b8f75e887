package zk

// Added to go-zookeeper v1.0.4's test package by scripts/compat/go-zookeeper/run.sh, which also
// makes TestCluster.waitForStart (server_help_test.go) call compatSrvrOK instead of FLWSrvr.
//
// Why: FLWSrvr's regular expression wants the `srvr` build date as "01/02/2006 15:04 MST"
// (ZooKeeper up to 3.6). ZooKeeper 3.7 changed it to "2006-01-02 15:04 MST" (go-zookeeper PR
// #72, never merged), so against ZooKeeper 3.9.5 -- and Warden, which answers `srvr` in 3.9.5's
// text -- waitForStart never sees a server up and every integration test fails in
// StartTestCluster. compatSrvrOK is FLWSrvr's check with only the date part relaxed: each
// server must answer `srvr` with the version, latency, traffic, zxid, mode and node count lines,
// in that order, as FLWSrvr requires.

import (
	"fmt"
	"regexp"
	"time"
)

var compatSrvrRe = regexp.MustCompile(fmt.Sprintf(`(?m:\A%v.*\n%v.*\n%v.*\n%v)`,
	`^Zookeeper version: ([A-Za-z0-9\.\-]+), built on (\d\d/\d\d/\d\d\d\d \d\d:\d\d [A-Za-z0-9:\+\-]+|\d\d\d\d-\d\d-\d\d \d\d:\d\d [A-Za-z0-9:\+\-]+)`,
	`^Latency min/avg/max: (\d+)/([0-9.]+)/(\d+)`,
	`^Received: (\d+).*\n^Sent: (\d+).*\n^Connections: (\d+).*\n^Outstanding: (\d+)`,
	`^Zxid: (0x[A-Za-z0-9]+).*\n^Mode: (\w+).*\n^Node count: (\d+)`,
))

func compatSrvrOK(servers []string, timeout time.Duration) bool {
	for _, server := range FormatServers(servers) {
		response, err := fourLetterWord(server, "srvr", timeout)
		if err != nil || !compatSrvrRe.Match(response) {
			return false
		}
	}
	return true
}
