package k8senv

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

const childEnv = "GPUBOT_K8SENV_CHILD"

// TestKilledTestBinaryTakesItsProcesses starts a control plane in a
// child test binary, kills that binary with SIGKILL (as a CI timeout
// would) and checks that etcd, kube-apiserver and Kueue go with it.
func TestKilledTestBinaryTakesItsProcesses(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		e, err := Start(context.Background(), Options{})
		if err != nil {
			t.Fatalf("starting: %v", err)
		}
		_ = e
		os.Stdout.WriteString("ready\n")
		select {} // until killed
	}
	if Skipped() || testing.Short() {
		t.Skip("needs the Kubernetes binaries (" + SkipEnv + "=1 or -short)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv(1) on this machine: etcd and kube-apiserver outlive a killed test binary")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKilledTestBinaryTakesItsProcesses$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "TMPDIR="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the child test binary ended before its control plane was ready")
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the child's control plane was not ready within 3 minutes")
	}
	kids := children(t, cmd.Process.Pid)
	names := map[string]int{}
	for _, pid := range kids {
		names[comm(pid)] = pid
	}
	for _, want := range []string{"etcd", "kube-apiserver", "kueue"} {
		if _, ok := names[want]; !ok {
			t.Fatalf("the child's processes are %v, no %s among them", names, want)
		}
	}
	t.Cleanup(func() { // survivors of a failed check
		for _, pid := range names {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, pid := range names {
		if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) { return !alive(pid), nil }); err != nil {
			t.Fatalf("%s (pid %d) still runs 30 s after the test binary that started it was killed", name, pid)
		}
	}
}

// children lists pid's child processes (Linux /proc).
func children(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	if err != nil || len(tasks) == 0 {
		t.Skipf("cannot read /proc/%d/task/*/children: %v", pid, err)
	}
	var pids []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

func comm(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(b))
}

// alive reports whether pid exists and is not a zombie waiting for its
// new parent to reap it.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
