package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one program the harness started. It runs in its own process
// group, so stopping it also stops anything it forked.
type Process struct {
	// Name identifies the process in logs and in the pid directory.
	Name string
	// Path and Args are the command line (Args without the program name).
	Path string
	Args []string
	// LogFile receives stdout and stderr.
	LogFile string
	// Env is added to the environment the process inherits.
	Env []string
	// NetNS, when set, is the network namespace the process runs in.
	NetNS *NetNS

	reg     *processes
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// Pid returns the process id of the running process, or 0.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true, nil
	}
	select {
	case <-done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// start runs the process with its output appended to LogFile.
func (p *Process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("start %s: already running", p.Name)
		}
	}
	logf, err := os.OpenFile(p.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the log of %s: %w", p.Name, err)
	}
	fmt.Fprintf(logf, "=== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), p.Path, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(childEnv(), p.Env...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Our own group: a signal to -pid reaches the whole process tree.
		Setpgid: true,
		// If this test process dies without its teardown (a panic, the
		// -timeout alarm, SIGKILL), the kernel kills the child too.
		Pdeathsig: syscall.SIGKILL,
	}
	startCmd := cmd.Start
	if p.NetNS != nil {
		startCmd = func() error { return p.NetNS.Do(cmd.Start) }
	}
	if err := startCmd(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	p.waitErr = nil
	done := p.done
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(done)
	}()
	if err := p.reg.record(p.Name, cmd.Process.Pid, p.Path); err != nil {
		return err
	}
	return nil
}

// Stop sends SIGTERM to the process group, waits up to grace for the
// process to exit, then sends SIGKILL and waits up to 10 more seconds.
func (p *Process) Stop(grace time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return nil
	}
	pid := cmd.Process.Pid
	defer p.reg.forget(p.Name)
	select {
	case <-done:
		return nil
	default:
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("stop %s (pid %d): still running 10s after SIGKILL", p.Name, pid)
	}
}

// childEnv is this process's environment without the variables that
// etcd reads as flags (ETCD_*): a developer's shell must not change the
// test cluster.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			env = append(env, kv)
		}
	}
	return env
}

// processes records the PIDs of one run in a directory, so that a later run
// can find and end what a crashed run left behind.
//
// Layout: <root>/<run>/owner holds the test process's pid and command line;
// <root>/<run>/<name>.pid holds a started process's pid and binary path.
type processes struct {
	dir string
}

// liveRuns are the pid directories of the runs this process has started
// and not yet removed: a test process may run several control planes at
// once, and its own pid alone cannot tell them from a crashed earlier run
// that had the same pid (a container's pids start over).
var liveRuns sync.Map

// pidRecord is the content of a <name>.pid file.
type pidRecord struct {
	Pid  int    `json:"pid"`
	Path string `json:"path"`
}

// ownerRecord is the content of an owner file.
type ownerRecord struct {
	Pid     int    `json:"pid"`
	Cmdline string `json:"cmdline"`
	// RunDir is the run's directory, whose etcd data a later run removes.
	RunDir string `json:"runDir"`
}

// etcdDataDir is the name of etcd's data directory inside a run directory.
const etcdDataDir = "etcd-data"

func newProcesses(root, runDir string) (*processes, error) {
	dir := filepath.Join(root, filepath.Base(runDir))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the pid directory: %w", err)
	}
	b, err := json.Marshal(ownerRecord{Pid: os.Getpid(), Cmdline: cmdline(os.Getpid()), RunDir: runDir})
	if err != nil {
		return nil, fmt.Errorf("encode the owner record: %w", err)
	}
	liveRuns.Store(dir, true)
	if err := os.WriteFile(filepath.Join(dir, "owner"), b, 0o600); err != nil {
		return nil, fmt.Errorf("write the owner record: %w", err)
	}
	return &processes{dir: dir}, nil
}

func (r *processes) record(name string, pid int, path string) error {
	b, err := json.Marshal(pidRecord{Pid: pid, Path: path})
	if err != nil {
		return fmt.Errorf("encode the pid record of %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, name+".pid"), b, 0o600); err != nil {
		return fmt.Errorf("write the pid record of %s: %w", name, err)
	}
	return nil
}

func (r *processes) forget(name string) {
	_ = os.Remove(filepath.Join(r.dir, name+".pid"))
}

// remove deletes the run's pid directory once everything is stopped.
func (r *processes) remove() error {
	liveRuns.Delete(r.dir)
	return os.RemoveAll(r.dir)
}

// killLeftovers ends the processes of earlier runs whose test process is
// gone. A run whose owner still runs is another suite running right now and
// is left alone. A recorded pid is killed only if it still runs the
// recorded binary, so a recycled pid is never hit.
func killLeftovers(root string, log *slog.Logger) error {
	runs, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the pid directory: %w", err)
	}
	for _, run := range runs {
		if !run.IsDir() {
			continue
		}
		dir := filepath.Join(root, run.Name())
		if _, mine := liveRuns.Load(dir); mine {
			continue
		}
		owner, alive := readOwner(filepath.Join(dir, "owner"))
		if alive {
			continue
		}
		files, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("read %s: %w", dir, err)
		}
		for _, f := range files {
			if !strings.HasSuffix(f.Name(), ".pid") {
				continue
			}
			var rec pidRecord
			b, err := os.ReadFile(filepath.Join(dir, f.Name()))
			if err != nil || json.Unmarshal(b, &rec) != nil || rec.Pid <= 1 {
				continue
			}
			if exe := argv0(rec.Pid); exe == "" || exe != rec.Path {
				continue
			}
			log.Warn("killing a leftover process of an earlier run", "pid", rec.Pid, "path", rec.Path)
			_ = syscall.Kill(-rec.Pid, syscall.SIGKILL)
			_ = syscall.Kill(rec.Pid, syscall.SIGKILL)
			waitGone(rec.Pid, 10*time.Second)
		}
		// The crashed run's etcd data is most of its disk use (WAL
		// preallocation); its logs stay for a post-mortem.
		if owner.RunDir != "" {
			if err := os.RemoveAll(filepath.Join(owner.RunDir, etcdDataDir)); err != nil {
				return fmt.Errorf("remove the etcd data of an earlier run: %w", err)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
	}
	return nil
}

// readOwner reads an owner file and tells whether that test process still
// runs (same pid, same command line, and not this process).
func readOwner(ownerFile string) (ownerRecord, bool) {
	var rec ownerRecord
	b, err := os.ReadFile(ownerFile)
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Pid <= 0 {
		return rec, false
	}
	return rec, rec.Pid != os.Getpid() && cmdline(rec.Pid) == rec.Cmdline
}

// cmdline returns /proc/<pid>/cmdline with NULs as spaces, or "".
func cmdline(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	return string(bytes.TrimRight(bytes.ReplaceAll(b, []byte{0}, []byte{' '}), " "))
}

// argv0 returns the program path a process was started with, or "".
func argv0(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return ""
	}
	first, _, _ := bytes.Cut(b, []byte{0})
	return string(first)
}

func waitGone(pid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tail returns the last n lines of a file, for failure reports.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Kill sends SIGKILL to the process group, as a crash or an OOM kill would
// end it, and waits up to 10 seconds for it to exit.
func (p *Process) Kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return nil
	}
	defer p.reg.forget(p.Name)
	pid := cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("kill %s (pid %d): still running 10s after SIGKILL", p.Name, pid)
	}
}
