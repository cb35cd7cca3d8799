// Command echocompare runs the same echo server written four ways (Go net
// with a goroutine per connection, gnet v2, nbio, and edgemux's gateway
// binary) and a load generator, each in a process of its own, and reports
// requests/s, server CPU per request, p99 and idle bytes per connection as
// ratios to the best peer of the run. run.sh drives it:
//
//	echocompare serve gonet|gnet|nbio -addr 127.0.0.1:5081
//	echocompare load -addr ... -pid PID -conns 19000 -active 50 -size 64 -out results.jsonl
//	echocompare report results.jsonl
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "serve":
		if len(os.Args) < 3 {
			usage()
		}
		err = serveMain(os.Args[2], os.Args[3:])
	case "load":
		err = loadMain(os.Args[2:])
	case "report":
		err = reportMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "echocompare:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: echocompare serve gonet|gnet|nbio [-addr A] | load [flags] | report FILE")
	os.Exit(2)
}
