package cluster

import (
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sleeper is a process that lives until killed.
type sleeper struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startSleeper starts one in its own process group, like the harness's
// processes, and kills it when the test ends.
func startSleeper(t *testing.T) *sleeper {
	t.Helper()
	path, err := exec.LookPath("sleep")
	require.NoError(t, err)
	s := &sleeper{cmd: exec.Command(path, "300"), done: make(chan struct{})}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, s.cmd.Start())
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	return s
}

func (s *sleeper) pid() int { return s.cmd.Process.Pid }

// ended waits up to limit for the process to exit.
func (s *sleeper) ended(limit time.Duration) bool {
	select {
	case <-s.done:
		return true
	case <-time.After(limit):
		return false
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

// A run whose test process is gone has its processes killed and its record
// and etcd data removed; a run whose owner still runs is left alone; a recorded pid that
// now runs another program is not touched.
func TestKillLeftovers(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	leftover, owner, bystander := startSleeper(t), startSleeper(t), startSleeper(t)

	runDir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(runDir, etcdDataDir), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(runDir, "etcd.log"), nil, 0o600))
	writeJSON(t, filepath.Join(root, "crashed", "owner"), ownerRecord{Pid: 1 << 30, Cmdline: "gone", RunDir: runDir})
	writeJSON(t, filepath.Join(root, "crashed", "etcd.pid"), pidRecord{Pid: leftover.pid(), Path: leftover.cmd.Path})
	writeJSON(t, filepath.Join(root, "crashed", "serve.pid"), pidRecord{Pid: bystander.pid(), Path: "/not/this/binary"})
	writeJSON(t, filepath.Join(root, "running", "owner"), ownerRecord{Pid: owner.pid(), Cmdline: cmdline(owner.pid())})
	writeJSON(t, filepath.Join(root, "running", "etcd.pid"), pidRecord{Pid: owner.pid(), Path: owner.cmd.Path})

	require.NoError(t, killLeftovers(root, slog.New(slog.DiscardHandler)))

	assert.True(t, leftover.ended(10*time.Second), "the crashed run's process is killed")
	assert.False(t, owner.ended(0), "the running suite's process is untouched")
	assert.False(t, bystander.ended(0), "a pid running another binary is untouched")
	assert.NoDirExists(t, filepath.Join(root, "crashed"))
	assert.NoDirExists(t, filepath.Join(runDir, etcdDataDir), "the crashed run's etcd data is removed")
	assert.FileExists(t, filepath.Join(runDir, "etcd.log"), "its logs stay")
	assert.DirExists(t, filepath.Join(root, "running"))
}

// A test process may run several control planes at once: starting one
// leaves the processes of the others alone, though their owner record
// names this very process; once removed, a run of this process is a
// leftover like any other.
func TestKillLeftovers_ownRunsKept(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	sleeper := startSleeper(t)
	procs, err := newProcesses(root, t.TempDir())
	require.NoError(t, err)
	require.NoError(t, procs.record("etcd", sleeper.pid(), sleeper.cmd.Path))

	require.NoError(t, killLeftovers(root, slog.New(slog.DiscardHandler)))
	assert.False(t, sleeper.ended(0), "a live run of this process is untouched")
	assert.DirExists(t, procs.dir)

	liveRuns.Delete(procs.dir) // as if this process had crashed and its pid come back
	require.NoError(t, killLeftovers(root, slog.New(slog.DiscardHandler)))
	assert.True(t, sleeper.ended(10*time.Second), "a run no live plane of this process owns is a leftover (pid %d, argv0 %q, recorded %q, owner record %s)",
		sleeper.pid(), argv0(sleeper.pid()), sleeper.cmd.Path, readFileOrErr(filepath.Join(procs.dir, "owner")))
	assert.NoDirExists(t, procs.dir)
}

// readFileOrErr is a file's text, or the error reading it, for a message.
func readFileOrErr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
