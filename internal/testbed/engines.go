package testbed

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Engine is a private PostgreSQL or nats-server a test started from the
// testbed's binaries. It listens on a fixed loopback port for its whole
// life, so Stop and Start simulate an outage that clients reconnect
// across. Cleanup stops it.
type Engine struct {
	// URL is how clients reach it (postgres://... or nats://...).
	URL string

	name string
	log  string
	argv []string
	cred *syscall.Credential
	port int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartPostgres initialises a fresh PostgreSQL cluster in a temporary
// directory and starts it with trust auth on a free loopback port; URL
// names its database "postgres".
func StartPostgres(t testing.TB) *Engine {
	t.Helper()
	pgBin := findBinary(t, "AEGIS_TESTBED_PG_BIN", func(e *Env) string { return e.PGBin }, pgBinDir)
	dir, err := os.MkdirTemp("", "aegis-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 { // initdb and postgres refuse to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("testbed: running as root needs a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(pgBin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("testbed: initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	e := &Engine{
		URL:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		name: "postgres", log: filepath.Join(dir, "postgres.log"), cred: cred, port: port,
		argv: []string{filepath.Join(pgBin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + dir, "-c", "fsync=off",
			"-c", "max_connections=100"},
	}
	e.start(t)
	return e
}

// StartNATS starts a private nats-server with JetStream on a free loopback
// port.
func StartNATS(t testing.TB) *Engine {
	t.Helper()
	natsServer := findBinary(t, "AEGIS_TESTBED_NATS_SERVER", func(e *Env) string { return e.NATSServer }, natsPath)
	dir := t.TempDir()
	port := freePort(t)
	e := &Engine{
		URL:  fmt.Sprintf("nats://127.0.0.1:%d", port),
		name: "nats-server", log: filepath.Join(dir, "nats.log"), port: port,
		argv: []string{natsServer, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "js")},
	}
	e.start(t)
	return e
}

func (e *Engine) start(t testing.TB) {
	t.Helper()
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
}

// Start starts the engine (again) on its port and waits until it accepts
// connections.
func (e *Engine) Start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(e.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	cmd := exec.Command(e.argv[0], e.argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("testbed: start %s: %w", e.name, err)
	}
	logf.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	e.cmd, e.exited = cmd, exited
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", e.port), time.Second)
		if err == nil {
			c.Close()
			if e.name == "postgres" {
				// The port opens before recovery ends; ask until it answers.
				if err := pgReady(ctx, filepath.Dir(e.argv[0]), e.port); err != nil {
					return err
				}
			}
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(e.log)
			e.cmd = nil
			return fmt.Errorf("testbed: %s exited at start:\n%s", e.name, log)
		case <-ctx.Done():
			return fmt.Errorf("testbed: %s not listening on port %d", e.name, e.port)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func pgReady(ctx context.Context, bin string, port int) error {
	for {
		if exec.CommandContext(ctx, filepath.Join(bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port)).Run() == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbed: postgres on port %d not ready", port)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the engine (a fast shutdown) and waits for it to exit. It is
// safe to call when it is not running.
func (e *Engine) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd == nil {
		return
	}
	sig := syscall.SIGTERM
	if e.name == "postgres" {
		sig = syscall.SIGINT // fast shutdown: abort open sessions
	}
	syscall.Kill(-e.cmd.Process.Pid, sig)
	select {
	case <-e.exited:
	case <-time.After(20 * time.Second):
		syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		<-e.exited
	}
	e.cmd = nil
}

// findBinary returns what the testbed's env file names, else what look
// finds on this machine (the binaries may exist while the running testbed
// predates them), else ends the test as Require does.
func findBinary(t testing.TB, key string, fromEnv func(*Env) string, look func() string) string {
	t.Helper()
	if testing.Short() && !Mandatory() {
		t.Skip("integration test skipped in -short mode")
	}
	if e, err := Load(); err == nil && fromEnv(e) != "" {
		return fromEnv(e)
	}
	if p := look(); p != "" {
		return p
	}
	err := fmt.Errorf("testbed: %s is not set and none is installed; run scripts/testbed up", key)
	if Mandatory() {
		t.Fatal(err)
	}
	t.Skip(err)
	return ""
}

// pgBinDir returns the newest /usr/lib/postgresql/<major>/bin with initdb.
func pgBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best, bestMajor := "", -1
	for _, d := range dirs {
		major, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if _, serr := os.Stat(filepath.Join(d, "initdb")); err == nil && serr == nil && major > bestMajor {
			best, bestMajor = d, major
		}
	}
	return best
}

func natsPath() string {
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/nats-server", "/usr/bin/nats-server"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
