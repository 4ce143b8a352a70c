// Package k8senv starts a real Kubernetes control plane with the real
// Kueue controller on this machine, from the binaries hack/k8s-assets.sh
// builds and caches: etcd and kube-apiserver (through controller-runtime's
// envtest), Kueue, and optionally kube-controller-manager, kube-scheduler
// and kwok with fake GPU nodes, so that pods run and finish. The
// integration tests and `make dev-cluster` use it; gpubot itself does not.
//
// Every process it starts is stopped by Env.Stop, which waits for each to
// exit. A test binary that is killed instead (a CI timeout, ^C of a
// process group, SIGKILL) takes them with it: each is started with the
// parent-death signal set (PR_SET_PDEATHSIG), etcd and kube-apiserver
// through setpriv(1) since envtest starts those, so that no control
// plane outlives the tests that started it.
//
// To see what Kueue decides and why (its scheduling cycles, the moves
// between a ClusterQueue's heap and its inadmissible workloads), set
// GPUBOT_KUEUE_LOG_LEVEL to a zap level (5 is the most verbose Kueue
// uses): Kueue logs at that level, and a temporary directory is kept,
// its path printed, so that kueue.log can be read after the tests.
package k8senv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// SkipEnv is the environment variable that, set to 1, skips everything
// that needs the cached binaries.
const SkipEnv = "GPUBOT_SKIP_K8S"

// LogLevelEnv is the environment variable that sets Kueue's log level
// (--zap-log-level) and keeps the logs (see the package doc).
const LogLevelEnv = "GPUBOT_KUEUE_LOG_LEVEL"

// Skipped reports whether integration tests should be skipped.
func Skipped() bool { return os.Getenv(SkipEnv) == "1" }

// Options select what to start besides etcd, the API server and Kueue.
type Options struct {
	// Nodes starts kube-controller-manager, kube-scheduler and kwok, so
	// that pods are scheduled onto fake nodes, run and complete.
	Nodes bool
	// Dir holds logs, certificates and the kubeconfig; "" is a temporary
	// directory removed by Stop.
	Dir string
	// Log receives the processes' output; nil writes to files in Dir.
	Log io.Writer
	// ManagerConfig overrides top-level keys of the shipped Kueue
	// manager Configuration (deploy/kueue/manager-config.yaml), such as
	// fairSharing; the ConfigMap gpubot reads holds the result too.
	ManagerConfig map[string]any
}

// Env is a running control plane.
type Env struct {
	// Config is an administrator's client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an administrator's kubeconfig file.
	Kubeconfig string
	// Assets is the directory of the cached binaries.
	Assets string
	// Dir holds logs and certificates.
	Dir string

	env     *envtest.Environment
	procs   []*exec.Cmd
	tempDir bool
}

// AssetsDir builds the binaries if needed (hack/k8s-assets.sh, found from
// the module root) and returns their directory.
func AssetsDir() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "k8s-assets.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the Kubernetes test binaries (hack/k8s-assets.sh): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "k8s-assets.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find hack/k8s-assets.sh above the working directory")
		}
		dir = parent
	}
}

// Start starts the control plane and Kueue, and waits until Kueue is ready.
func Start(ctx context.Context, o Options) (_ *Env, err error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	e := &Env{Assets: assets, Dir: o.Dir}
	if e.Dir == "" {
		if e.Dir, err = os.MkdirTemp("", "gpubot-k8s-"); err != nil {
			return nil, err
		}
		e.tempDir = true
	}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	e.env = &envtest.Environment{
		ControlPlane:          e.controlPlane(),
		BinaryAssetsDirectory: filepath.Join(assets, "bin"),
		// Kueue's CRDs and the cluster autoscaler's ProvisioningRequest:
		// with it, Kueue runs its ProvisioningRequest admission check
		// controller (it checks for the CRD when it starts).
		CRDDirectoryPaths:     []string{filepath.Join(assets, "kueue", "crds"), filepath.Join(assets, "autoscaler", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	if e.Config, err = e.env.Start(); err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	admin, err := e.env.AddUser(envtest.User{Name: "gpubot-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding the admin user: %w", err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	e.Config = admin.Config()
	// client-go's default (5 requests a second, bursts of 10) would make
	// setting up a cluster of a few dozen fake nodes take a quarter of a
	// minute; the tests' own clients need no throttling.
	e.Config.QPS, e.Config.Burst = 200, 400
	if err := e.startKueue(ctx, o); err != nil {
		return nil, err
	}
	if o.Nodes {
		if err := e.startNodes(ctx, o); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *Env) startKueue(ctx context.Context, o Options) error {
	certDir := filepath.Join(e.Dir, "kueue-certs")
	if err := selfSigned(certDir); err != nil {
		return err
	}
	// Kueue 0.17 reads metrics certificates from a fixed path even with
	// metrics off and internal certificate management disabled.
	if _, err := os.Stat("/etc/kueue/metrics/certs/tls.crt"); err != nil {
		if err := selfSigned("/etc/kueue/metrics/certs"); err != nil {
			return fmt.Errorf("writing Kueue's metrics certificates (needs root): %w", err)
		}
	}
	health, webhook := freePort(), freePort()
	local := map[string]any{
		"namespace":              "kueue-system",
		"health":                 map[string]any{"healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", health)},
		"metrics":                map[string]any{"bindAddress": "0"},
		"webhook":                map[string]any{"host": "127.0.0.1", "port": webhook, "certDir": certDir},
		"leaderElection":         map[string]any{"leaderElect": false},
		"internalCertManagement": map[string]any{"enable": false},
	}
	for k, v := range o.ManagerConfig {
		local[k] = v
	}
	cfg, shipped, err := managerConfig(local)
	if err != nil {
		return err
	}
	if len(o.ManagerConfig) > 0 {
		if shipped, err = withKeys(shipped, o.ManagerConfig); err != nil {
			return err
		}
	}
	if err := e.publishManagerConfig(ctx, shipped); err != nil {
		return err
	}
	path := filepath.Join(e.Dir, "kueue-config.yaml")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		return err
	}
	args := []string{"--config", path, "--kubeconfig", e.Kubeconfig, "--feature-gates", "VisibilityOnDemand=false"}
	if level := os.Getenv(LogLevelEnv); level != "" {
		args = append(args, "--zap-log-level="+level)
	}
	if err := e.run(o, "kueue", filepath.Join(e.Assets, "bin", "kueue"), args...); err != nil {
		return err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", health)
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		if err := e.exited(); err != nil {
			return false, err
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func (e *Env) startNodes(ctx context.Context, o Options) error {
	bin := func(n string) string { return filepath.Join(e.Assets, "bin", n) }
	saKey := filepath.Join(e.env.ControlPlane.APIServer.CertDir, "sa-signer.key")
	if err := e.run(o, "kube-controller-manager", bin("kube-controller-manager"),
		"--kubeconfig", e.Kubeconfig, "--authentication-kubeconfig", e.Kubeconfig, "--authorization-kubeconfig", e.Kubeconfig,
		"--controllers", "*", "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(freePort()),
		"--service-account-private-key-file", saKey, "--use-service-account-credentials=false",
		"--node-monitor-grace-period", "40s"); err != nil {
		return err
	}
	if err := e.run(o, "kube-scheduler", bin("kube-scheduler"),
		"--kubeconfig", e.Kubeconfig, "--authentication-kubeconfig", e.Kubeconfig, "--authorization-kubeconfig", e.Kubeconfig,
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(freePort())); err != nil {
		return err
	}
	stages, err := filepath.Glob(filepath.Join(e.Assets, "kwok", "stages", "*.yaml"))
	if err != nil || len(stages) == 0 {
		return fmt.Errorf("no kwok stage files in %s", filepath.Join(e.Assets, "kwok", "stages"))
	}
	args := []string{"--kubeconfig", e.Kubeconfig, "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-lease-duration-seconds=40", "--server-address", fmt.Sprintf("127.0.0.1:%d", freePort())}
	for _, s := range stages {
		args = append(args, "--config", s)
	}
	return e.run(o, "kwok", bin("kwok"), args...)
}

// controlPlane returns envtest's control plane with etcd and
// kube-apiserver started through setpriv --pdeathsig KILL (wrapper
// scripts in Dir that exec it, so that envtest's SIGTERM on Stop still
// reaches the binary itself). Without setpriv, envtest starts the binaries
// as usual and a killed test binary leaves them running.
func (e *Env) controlPlane() envtest.ControlPlane {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return envtest.ControlPlane{}
	}
	wrap := func(name string) string {
		path := filepath.Join(e.Dir, "pdeathsig-"+name)
		script := fmt.Sprintf("#!/bin/sh\nexec '%s' --pdeathsig KILL -- '%s' \"$@\"\n", setpriv, filepath.Join(e.Assets, "bin", name))
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			return ""
		}
		return path
	}
	return envtest.ControlPlane{
		APIServer: &envtest.APIServer{Path: wrap("kube-apiserver")},
		Etcd:      &envtest.Etcd{Path: wrap("etcd")},
	}
}

// run starts a process in its own process group, logging to Dir/<name>.log.
func (e *Env) run(o Options, name, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	// Pdeathsig: a killed test binary takes its processes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out := o.Log
	if out == nil {
		f, err := os.Create(filepath.Join(e.Dir, name+".log"))
		if err != nil {
			return err
		}
		out = f
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	e.procs = append(e.procs, cmd)
	return nil
}

// exited reports a started process that has already exited.
func (e *Env) exited() error {
	for _, p := range e.procs {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(p.Process.Pid, &ws, syscall.WNOHANG, nil)
		if err == nil && pid == p.Process.Pid {
			p.Process = nil
			return fmt.Errorf("%s exited (%v); see its log in %s", filepath.Base(p.Path), ws, e.Dir)
		}
	}
	return nil
}

// Stop stops every process Start started, in reverse order, waiting for
// each to exit, then the API server and etcd.
func (e *Env) Stop() error {
	var errs []error
	for i := len(e.procs) - 1; i >= 0; i-- {
		p := e.procs[i]
		if p.Process == nil {
			continue
		}
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	e.procs = nil
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case e.tempDir && os.Getenv(LogLevelEnv) != "":
		fmt.Fprintf(os.Stderr, "k8senv: logs kept in %s (%s is set)\n", e.Dir, LogLevelEnv)
	case e.tempDir:
		_ = os.RemoveAll(e.Dir)
	}
	return errors.Join(errs...)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// selfSigned writes tls.crt and tls.key for 127.0.0.1 into dir.
func selfSigned(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "gpubot-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}

// ManagerConfigFile is the Kueue manager Configuration the environment
// runs Kueue with, relative to the module root: the one gpubot ships.
const ManagerConfigFile = "deploy/kueue/manager-config.yaml"

// managerConfig returns the shipped Kueue Configuration with the local
// settings (addresses, ports, certificates) replaced, and the shipped
// file itself.
func managerConfig(local map[string]any) (cfg, shipped []byte, err error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, nil, err
	}
	shipped, err = os.ReadFile(filepath.Join(root, ManagerConfigFile))
	if err != nil {
		return nil, nil, fmt.Errorf("reading Kueue's manager Configuration: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(shipped, &m); err != nil {
		return nil, nil, fmt.Errorf("parsing %s: %w", ManagerConfigFile, err)
	}
	for k, v := range local {
		m[k] = v
	}
	cfg, err = yaml.Marshal(m)
	return cfg, shipped, err
}

// withKeys is the Configuration data with top-level keys replaced.
func withKeys(data []byte, keys map[string]any) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", ManagerConfigFile, err)
	}
	for k, v := range keys {
		m[k] = v
	}
	return yaml.Marshal(m)
}

// publishManagerConfig stores Kueue's Configuration where a Kueue install
// keeps it, the ConfigMap kueue-manager-config in kueue-system, so that
// gpubot reads it as on a real cluster.
func (e *Env) publishManagerConfig(ctx context.Context, shipped []byte) error {
	kube, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kueue-system"}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace kueue-system: %w", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kueue-manager-config", Namespace: "kueue-system"},
		Data: map[string]string{"controller_manager_config.yaml": string(shipped)}}
	if _, err := kube.CoreV1().ConfigMaps("kueue-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ConfigMap kueue-system/kueue-manager-config: %w", err)
	}
	return nil
}
