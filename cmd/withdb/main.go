// Command withdb runs a command with DATABASE_URL pointing at a PostgreSQL it finds or starts.
//
// In order: DATABASE_URL if set; else PostgreSQL on localhost:5432 (user
// postgres); else a throwaway cluster from the machine's PostgreSQL server
// binaries, removed when the command ends; else it says what to install.
// With -db NAME it creates that database if missing and points at it.
//
//	go run ./cmd/withdb -db helpdesk -- go run ./cmd/helpdesk serve
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/helpdesk-dev/helpdesk/settings"

	"github.com/jackc/pgx/v5"
)

const localURL = "postgres://postgres@localhost:5432/postgres?sslmode=disable"

func main() {
	dbName := flag.String("db", "", "database to create if missing and use (default: the URL's own)")
	throwaway := flag.Bool("throwaway", false, "skip DATABASE_URL and localhost:5432; always start a throwaway cluster")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: withdb [-db NAME] [-throwaway] -- COMMAND [ARGS...]\n\n"+
			"Runs COMMAND with DATABASE_URL set: $DATABASE_URL, else PostgreSQL on localhost:5432,\n"+
			"else a throwaway cluster from the machine's PostgreSQL binaries.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(*dbName, *throwaway, flag.Args(), scrubbed(os.Stderr, os.Getenv)))
}

// scrubbed is w without DATABASE_URL's password, which errors of the
// driver may quote.
func scrubbed(w io.Writer, getenv func(string) string) io.Writer {
	sc := settings.NewScrubber(w)
	sc.Hide(settings.SecretParts(nil, getenv("DATABASE_URL"))...)
	return sc
}

func run(dbName string, throwaway bool, command []string, stderr io.Writer) int {
	ctx := context.Background()
	dbURL, stop, err := findDatabase(ctx, throwaway)
	if err != nil {
		fmt.Fprintf(stderr, "withdb: %v\n", err)
		return 1
	}
	defer stop()
	if dbName != "" {
		if dbURL, err = ensureDatabase(ctx, dbURL, dbName); err != nil {
			fmt.Fprintf(stderr, "withdb: %v\n", err)
			return 1
		}
	}

	fmt.Fprintf(stderr, "withdb: DATABASE_URL=%s\n", settings.MaskURL(dbURL))
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "withdb: %v\n", err)
		return 1
	}
	// Pass Ctrl-C and SIGTERM on, and wait for the command so the throwaway
	// cluster is only removed once nothing uses it.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		for sig := range signals {
			_ = cmd.Process.Signal(sig)
		}
	}()
	err = cmd.Wait()
	signal.Stop(signals)
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if code := exitErr.ExitCode(); code > 0 {
			return code
		}
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "withdb: %v\n", err)
		return 1
	}
	return 0
}

func findDatabase(ctx context.Context, throwaway bool) (string, func(), error) {
	noop := func() {}
	if !throwaway {
		if u := os.Getenv("DATABASE_URL"); u != "" {
			if err := ping(ctx, u); err != nil {
				return "", noop, fmt.Errorf("DATABASE_URL is set but PostgreSQL does not answer there: %w", err)
			}
			return u, noop, nil
		}
		if err := ping(ctx, localURL); err == nil {
			return localURL, noop, nil
		}
	}
	binDir, err := findServerBinaries()
	if err != nil {
		return "", noop, err
	}
	fmt.Fprintf(os.Stderr, "withdb: no PostgreSQL on localhost:5432; starting a throwaway cluster from %s\n", binDir)
	return startCluster(ctx, binDir)
}

func ping(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}

// findServerBinaries looks for initdb: on PATH, then in Debian's
// /usr/lib/postgresql/*/bin (newest first), then where Homebrew puts it.
func findServerBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	var candidates []string
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/opt/homebrew/opt/postgresql*/bin", "/usr/local/opt/postgresql*/bin"} {
		matches, _ := filepath.Glob(pattern)
		sort.Sort(sort.Reverse(sort.StringSlice(matches)))
		candidates = append(candidates, matches...)
	}
	for _, dir := range candidates {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("PostgreSQL is not reachable on localhost:5432 and no PostgreSQL server binaries (initdb) were found.\n" +
		"Install them, then run this again:\n" +
		"  Debian/Ubuntu: sudo apt-get install postgresql\n" +
		"  Fedora:        sudo dnf install postgresql-server\n" +
		"  macOS:         brew install postgresql@16\n" +
		"or set DATABASE_URL to a PostgreSQL you have.")
}

// startCluster initialises a cluster in a temporary folder and starts it on
// a free loopback port. PostgreSQL refuses to run as root, so as root the
// cluster belongs to the postgres user.
func startCluster(ctx context.Context, binDir string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "helpdesk-pg-")
	if err != nil {
		return "", func() {}, err
	}
	cleanupDir := func() { _ = os.RemoveAll(dir) }
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			cleanupDir()
			return "", func() {}, errors.New("running as root, and there is no postgres user to run a throwaway cluster as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			cleanupDir()
			return "", func() {}, err
		}
	}
	pgCmd := func(name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = dir
		return cmd
	}
	data := filepath.Join(dir, "data")
	if out, err := pgCmd("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		cleanupDir()
		return "", func() {}, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		cleanupDir()
		return "", func() {}, err
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=200", port, dir)
	if out, err := pgCmd("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start").CombinedOutput(); err != nil {
		cleanupDir()
		return "", func() {}, fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	stop := func() {
		_ = pgCmd("pg_ctl", "-D", data, "-m", "fast", "-w", "stop").Run()
		cleanupDir()
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), stop, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ensureDatabase creates the database if missing and returns a URL to it.
func ensureDatabase(ctx context.Context, dbURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look for database %s: %w", name, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("parse database URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}
