// Command devcluster runs a local Kubernetes cluster for trying gpubot on
// a real Kueue: etcd, kube-apiserver, the Kueue controller,
// kube-controller-manager, kube-scheduler and kwok with fake GPU nodes
// laid out in blocks and racks as the configuration's simulated cluster,
// with the example Kueue setup (deploy/kueue/setup.yaml) applied. It runs
// until interrupted and then stops everything it started.
//
// Usage (from the repository root; hack/dev-cluster.sh wraps it):
//
//	devcluster [-config gpubot.yaml] [-setup deploy/kueue/setup.yaml] -dir DIR
//
// It writes DIR/kubeconfig, DIR/gpubot.yaml (the bundled example with Job
// templates whose pods run until Kueue ends them at their requested time;
// only without -config) and, once everything is ready, DIR/ready.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gpubot/gpubot/deploy"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

func main() { os.Exit(run()) }

func run() int {
	cfgPath := flag.String("config", "", "gpubot configuration whose flavors' nodes to create; default: the bundled example")
	setup := flag.String("setup", filepath.Join("deploy", "kueue", "setup.yaml"), "Kueue objects to apply")
	dir := flag.String("dir", "", "directory for the kubeconfig, logs and state (required)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "devcluster: -dir is required")
		return 2
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		return 1
	}
	_ = os.Remove(filepath.Join(*dir, "ready"))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	env, err := k8senv.Start(ctx, k8senv.Options{Nodes: true, Dir: *dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		return 1
	}
	defer env.Stop()
	if err := populate(ctx, env, *cfgPath, *setup); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(*dir, "ready"), []byte(env.Kubeconfig+"\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		return 1
	}
	fmt.Printf("dev cluster ready in %s; kubeconfig: %s\n", time.Since(start).Round(100*time.Millisecond), env.Kubeconfig)
	<-ctx.Done()
	fmt.Println("stopping the dev cluster")
	return 0
}

func populate(ctx context.Context, env *k8senv.Env, cfgPath, setup string) error {
	cfg, err := config.Default()
	if cfgPath != "" {
		cfg, err = config.Load(cfgPath)
	}
	if err != nil {
		return err
	}
	if err := env.Example(ctx, setup, cfg.Cluster().Nodes); err != nil {
		return err
	}
	if cfgPath == "" {
		return writeConfig(filepath.Join(filepath.Dir(env.Kubeconfig), "gpubot.yaml"), cfg.Settings().Templates)
	}
	return nil
}

// writeConfig writes the bundled example configuration with Job templates
// whose pods kwok keeps running (for a year), so that a request runs until
// Kueue ends it at its requested duration, as on a real cluster.
func writeConfig(path string, templates []string) error {
	var b strings.Builder
	b.Write(deploy.ExampleConfig)
	b.WriteString("\n# Added by make dev-cluster: pods on the fake nodes run until Kueue stops them.\nkubernetes:\n  jobTemplates:\n")
	for _, t := range templates {
		fmt.Fprintf(&b, `    %s:
      apiVersion: batch/v1
      kind: Job
      spec:
        backoffLimit: 0
        template:
          metadata:
            annotations:
              pod-complete.stage.kwok.x-k8s.io/delay: 8760h
              pod-complete.stage.kwok.x-k8s.io/jitter-delay: 8760h
          spec:
            restartPolicy: Never
            containers: [{name: main, image: registry.k8s.io/pause:3.10}]
`, t)
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}
