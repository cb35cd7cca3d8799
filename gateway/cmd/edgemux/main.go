// Command edgemux runs the multi-protocol edge gateway, checks its
// config, and is a command-line client for it (docs/CLI.md):
//
//	edgemux [run] [-c FILE]        run the gateway (without -c or EDGEMUX_CONFIG: the built-in defaults)
//	edgemux check [-c FILE]        validate a config file: ok and any warnings,
//	                               exit 0; or every error, exit 1
//	edgemux pub -t TOPIC -m VALUE  publish a value over the private protocol
//	edgemux sub -t FILTER          print messages as they arrive
//	edgemux get -t TOPIC           print a topic's last value
//	edgemux version                print the version, revision and build time
//	edgemux help [COMMAND]         list the commands, or one command's flags
//
// SIGTERM and SIGINT drain and exit; SIGHUP reloads routes and limits from
// the config file without dropping live connections.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/edgemux/edgemux/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// env is what a command reads and writes besides its flags.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// command is one subcommand. flags defines its flags on fs and returns
// the action that runs once they are parsed; help calls it without
// running the action, to list them.
type command struct {
	name    string
	args    string // the synopsis after the name
	summary string // one line for the command list
	flags   func(fs *flag.FlagSet, e env) func() int
}

// commands lists the subcommands in the order help shows them.
var commands []command

func init() { // here, not in the var: help refers to commands
	commands = []command{
		{"run", "[-c FILE] [-drain D]", "run the gateway (the default command)", runCommand},
		{"check", "[-c FILE]", "validate a config file: every error, or ok and any warnings", checkCommand},
		{"pub", "-t TOPIC -m VALUE", "publish a value to a running gateway (private protocol)", pubCommand},
		{"sub", "-t FILTER [-C N] [-W D] [-json]", "print the messages of a topic filter as they arrive", subCommand},
		{"get", "-t TOPIC [-json]", "print a topic's last value; none is an error (exit 1)", getCommand},
		{"version", "", "print the version, VCS revision and build time", versionCommand},
		{"help", "[COMMAND]", "list the commands, or show one command's flags", helpCommand},
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	return runWith(args, env{stdin: os.Stdin, stdout: stdout, stderr: stderr})
}

func runWith(args []string, e env) int {
	name := "run"
	if len(args) > 0 {
		switch a := args[0]; {
		case a == "-h" || a == "-help" || a == "--help":
			usage(e.stdout)
			return 0
		case a != "" && a[0] != '-':
			name, args = a, args[1:]
		}
	}
	cmd, ok := lookup(name)
	if !ok {
		fmt.Fprintf(e.stderr, "edgemux: unknown command %q\n\n", name)
		usage(e.stderr)
		return exitUsage
	}
	fs := newFlagSet(cmd, e)
	action := cmd.flags(fs, e)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			commandHelp(e.stdout, cmd, fs)
			return 0
		}
		return exitUsage
	}
	if fs.NArg() > 0 && cmd.name != "help" {
		return usageError(e.stderr, cmd.name, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	return action()
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// newFlagSet makes cmd's flag set: errors go to stderr; runWith prints
// the help for -h.
func newFlagSet(cmd command, e env) *flag.FlagSet {
	fs := flag.NewFlagSet("edgemux "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {}
	return fs
}

// configFlag defines -c, whose default is $EDGEMUX_CONFIG; the flag wins.
// without says what happens with neither.
func configFlag(fs *flag.FlagSet, without string) *string {
	return fs.String("c", os.Getenv("EDGEMUX_CONFIG"), "config file (YAML); default $EDGEMUX_CONFIG, else "+without)
}

func runCommand(fs *flag.FlagSet, e env) func() int {
	file := configFlag(fs, "the built-in defaults")
	drain := fs.Duration("drain", 10*time.Second, "how long SIGTERM waits for connections to finish")
	return func() int { return serve(*file, *drain, e.stderr) }
}

func checkCommand(fs *flag.FlagSet, e env) func() int {
	file := configFlag(fs, "required")
	return func() int {
		if *file == "" {
			return usageError(e.stderr, "check", "-c FILE (or EDGEMUX_CONFIG) is required")
		}
		cfg, err := config.Load(*file)
		if err != nil {
			fmt.Fprintln(e.stderr, err)
			return 1
		}
		fmt.Fprintln(e.stdout, *file+": ok")
		for _, w := range cfg.Warnings() {
			fmt.Fprintln(e.stdout, "warning:", w)
		}
		return 0
	}
}
