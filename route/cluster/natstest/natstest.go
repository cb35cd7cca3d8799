// Package natstest runs the Debian nats-server, with JetStream, for the
// tests of the cluster bus: on a free loopback port, its store in a
// temporary directory, stopped when the test ends. A missing binary fails
// the test (CI installs it), it does not skip.
package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// binary finds the nats-server the tests run: Debian's, in /usr/sbin or
// /usr/bin by release, or the first on PATH.
func binary() (string, error) {
	for _, p := range []string{"/usr/sbin/nats-server", "/usr/bin/nats-server"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return exec.LookPath("nats-server")
}

// Server is one running nats-server.
type Server struct {
	t    testing.TB
	bin  string
	args []string
	port int
	dir  string
	cmd  *exec.Cmd
}

// CheckConfig runs nats-server -t on a configuration file: it parses it
// and says whether it is valid, starting nothing.
func CheckConfig(t testing.TB, path string) {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatalf("nats-server is needed (apt-get install nats-server): %v", err)
	}
	if out, err := exec.Command(bin, "-t", "-c", path).CombinedOutput(); err != nil {
		t.Errorf("%s: %v\n%s", path, err, out)
	}
}

// Start runs a nats-server with JetStream until the test ends; args are
// added to its command line (--user u --pass p, say).
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatalf("nats-server is needed (apt-get install nats-server): %v", err)
	}
	s := &Server{t: t, bin: bin, port: freePort(t), dir: t.TempDir(), args: args}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// URL is the client URL of the server.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// Stop kills the server and waits for it; it is idempotent.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server (again) on the same port and store, and
// returns once it takes connections.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	cmd := exec.Command(s.bin, append([]string{"-js", "-a", "127.0.0.1", "-p", fmt.Sprint(s.port), "-sd", s.dir}, s.args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if !testing.Verbose() {
		cmd.Stdout, cmd.Stderr = nil, nil
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port))
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("nats-server does not listen on %d: %v", s.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartCluster runs n nats-servers (3 for JetStream's Raft) routed to
// each other as one NATS cluster on loopback, until the test ends.
// JetStream there is ready only once the nodes have elected a leader,
// some seconds after they listen.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatalf("nats-server is needed (apt-get install nats-server): %v", err)
	}
	routes := make([]int, n)
	for i := range routes {
		routes[i] = freePort(t)
	}
	var routeURLs []string
	for _, p := range routes {
		routeURLs = append(routeURLs, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	dir := t.TempDir()
	servers := make([]*Server, n)
	for i := range servers {
		conf := filepath.Join(dir, fmt.Sprintf("node%d.conf", i+1))
		text := fmt.Sprintf("server_name: node%d\ncluster {\n  name: test\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n",
			i+1, routes[i], strings.Join(routeURLs, ", "))
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		servers[i] = &Server{t: t, bin: bin, port: freePort(t), dir: filepath.Join(dir, fmt.Sprint(i+1)), args: []string{"-c", conf}}
	}
	for _, s := range servers {
		s.Restart()
		t.Cleanup(s.Stop)
	}
	return servers
}
