package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
)

// singleServer writes the config of a one-server cluster on dataDir and
// returns its path and HTTP address.
func singleServer(t *testing.T, dataDir string) (cfg, addr string) {
	ports := chaosPorts(t, 2)
	cfg = filepath.Join(t.TempDir(), "allot.hcl")
	hcl := "node_id = \"solo\"\n" + oneServerHCL(dataDir, ports, chaosWriteToken)
	if err := os.WriteFile(cfg, []byte(hcl), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, fmt.Sprintf("127.0.0.1:%d", ports[0])
}

// serverProc is an `allot server` process this test started.
type serverProc struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{} // closed when it has exited; err is then set
	err    error
}

// runUntilAnswers starts `allot server -config cfg` and waits until it has
// accepted a budgets apply. The process is killed (by its PID) when the
// test ends.
func runUntilAnswers(t *testing.T, bin, cfg, addr string) *serverProc {
	t.Helper()
	p := &serverProc{cmd: exec.Command(bin, "server", "-config", cfg, "-log-level", "warn"), out: &lockedBuffer{},
		exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	})
	cl, _ := client.New(addr, chaosWriteToken, nil)
	waitFor(t, 30*time.Second, "the server to take a write", func() (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("allot server exited: %v\n%s", p.err, p.out.String())
		default:
		}
		_, err := cl.ApplyBudgets(context.Background(), chaosBudgets("before"))
		return err == nil, nil
	})
	return p
}

// TestChaosDamagedStoreBinary: `allot server` on a raft.db truncated to 0
// bytes exits 1 with what is wrong and how to recover, instead of starting
// an empty cluster.
func TestChaosDamagedStoreBinary(t *testing.T) {
	if os.Getenv("ALLOT_CHAOS") != "1" {
		t.Skip("skip: runs with ALLOT_CHAOS=1 (make chaos)")
	}
	bin := allotBinary(t)
	dataDir := t.TempDir()
	cfg, addr := singleServer(t, dataDir)
	p := runUntilAnswers(t, bin, cfg, addr)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.exited
	if err := os.Truncate(filepath.Join(dataDir, "raft", "raft.db"), 0); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "server", "-config", cfg, "-log-level", "warn").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("allot server on an emptied raft.db: %v\n%s", err, out)
	}
	for _, want := range []string{"is empty (0 bytes)", "restore", "remove-peer"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("refused: %s", strings.TrimSpace(string(out)))
}

// TestChaosStoreFullBinary: the disk under data_dir fills up (a small
// tmpfs) while the server runs. The server stops with exit status 1 and a
// message naming data_dir, and does not panic. Needs root (mount).
func TestChaosStoreFullBinary(t *testing.T) {
	if os.Getenv("ALLOT_CHAOS") != "1" {
		t.Skip("skip: runs with ALLOT_CHAOS=1 (make chaos)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("skip: cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	bin := allotBinary(t)
	dataDir := filepath.Join(mnt, "data")
	cfg, addr := singleServer(t, dataDir)
	p := runUntilAnswers(t, bin, cfg, addr)
	out := p.out
	// Fill the disk.
	_ = exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(mnt, "filler"), "bs=64k").Run()
	cl, _ := client.New(addr, chaosWriteToken, nil)
	waitFor(t, 30*time.Second, "the server to stop on the full disk", func() (bool, error) {
		select {
		case <-p.exited:
			return true, nil
		default:
		}
		// Charges big enough to need new pages.
		var chs []client.Charge
		for k := 0; k < 200; k++ {
			from := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
			chs = append(chs, client.Charge{Alloc: fmt.Sprintf("fill-%d-%d", time.Now().UnixNano(), k), Budget: "chaos/w0",
				GPUs: 1, From: from, To: from.Add(time.Minute)})
		}
		_, _ = cl.AppendLedger(context.Background(), &client.LedgerAppend{Charges: chs})
		return false, nil
	})
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1\n%s", p.err, out.String())
	}
	for _, want := range []string{"raft store failed", "read-only, full or failing", dataDir} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "panic:") {
		t.Fatalf("the server panicked:\n%s", out.String())
	}
	t.Logf("stopped: %s", lastLine(out.String()))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
