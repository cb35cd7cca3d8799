package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"
)

// usage lists every command with its one line.
func usage(w io.Writer) {
	fmt.Fprintln(w, "edgemux: a multi-protocol IoT edge gateway, and a client for it")
	fmt.Fprintln(w, "\nUsage: edgemux COMMAND [flags]   (no command: run)")
	fmt.Fprintln(w, "\nCommands:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w, "\n\"edgemux help COMMAND\" shows a command's flags.")
	fmt.Fprintln(w, "The client commands (pub, sub, get) exit 0 ok, 1 error answer, 2 usage, 3 cannot connect, 4 timed out.")
}

// commandHelp shows cmd's synopsis and the flags defined on fs.
func commandHelp(w io.Writer, cmd command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: edgemux %s %s\n\n%s.\n", cmd.name, cmd.args, upperFirst(cmd.summary))
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// helpCommand: edgemux help [COMMAND].
func helpCommand(fs *flag.FlagSet, e env) func() int {
	return func() int {
		switch fs.NArg() {
		case 0:
			usage(e.stdout)
			return 0
		case 1:
		default:
			return usageError(e.stderr, "help", "one command at most")
		}
		cmd, ok := lookup(fs.Arg(0))
		if !ok {
			fmt.Fprintf(e.stderr, "edgemux help: unknown command %q\n\n", fs.Arg(0))
			usage(e.stderr)
			return exitUsage
		}
		cfs := newFlagSet(cmd, e)
		cmd.flags(cfs, e)
		commandHelp(e.stdout, cmd, cfs)
		return 0
	}
}

// Release builds stamp these with -ldflags "-X main.version=v1.2.0
// -X main.revision=... -X main.buildTime=..." (make release); a plain
// go build leaves them empty, and version reads what the Go toolchain
// recorded (runtime/debug.ReadBuildInfo) instead.
var (
	version   string
	revision  string
	buildTime string
)

// buildInfo is what version prints.
type buildInfo struct {
	version  string // module version, or "devel"
	revision string // VCS revision, "+dirty" when built from a modified tree; "unknown" if none
	time     string // when it was built (release builds), else when the revision was committed
	timeKind string // "built" or "committed"
	goVer    string
}

// readBuildInfo merges the -ldflags stamps over the toolchain's record.
func readBuildInfo() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return stamped(fromToolchain(bi), version, revision, buildTime)
}

// fromToolchain reads what the Go toolchain recorded in the binary; bi
// may be nil (a binary built without module support).
func fromToolchain(bi *debug.BuildInfo) buildInfo {
	b := buildInfo{version: "devel", revision: "unknown", time: "unknown", timeKind: "committed", goVer: runtime.Version()}
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			b.version = v
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.revision = s.Value
			case "vcs.time":
				b.time = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && b.revision != "unknown" {
			b.revision += "+dirty"
		}
	}
	return b
}

// stamped puts the -ldflags stamps that are set over b.
func stamped(b buildInfo, version, revision, buildTime string) buildInfo {
	if version != "" {
		b.version = version
	}
	if revision != "" {
		b.revision = revision
	}
	if buildTime != "" {
		b.time, b.timeKind = buildTime, "built"
	}
	return b
}

func (b buildInfo) String() string {
	return fmt.Sprintf("edgemux %s\nrevision %s\n%s %s\n%s %s/%s\n",
		b.version, b.revision, b.timeKind, b.time, b.goVer, runtime.GOOS, runtime.GOARCH)
}

// versionCommand: edgemux version.
func versionCommand(fs *flag.FlagSet, e env) func() int {
	return func() int {
		fmt.Fprint(e.stdout, readBuildInfo())
		return 0
	}
}
