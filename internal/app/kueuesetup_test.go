package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/internal/app"
)

// The shipped Kueue setup is what `gpubot kueue-setup` writes for the
// bundled example: a change to one without the other fails here.
// go test ./internal/app -update rewrites deploy/kueue/setup.yaml.
func TestShippedKueueSetupIsGenerated(t *testing.T) {
	got, err := app.KueueSetup("")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "deploy", "kueue", "setup.yaml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (go test ./internal/app -update writes it): %v", path, err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("deploy/kueue/setup.yaml is not what gpubot kueue-setup writes for deploy/gpubot.example.yaml; run go test ./internal/app -run KueueSetup -update (-shipped +generated):\n%s", d)
	}
}

// kueue-setup follows the configuration: the NVIDIA GPU operator's label,
// other namespaces and LocalQueues, no cohort.
func TestKueueSetupFollowsTheConfiguration(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "deploy", "gpubot.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer(
		"accelerator: nvidia-h100-80gb", "accelerator: NVIDIA-H100-80GB-HBM3",
		"  - name: vision\n", "  - name: vision\n    namespace: team-vision\n    localQueue: vision-q\n",
	).Replace(string(src)) + "kubernetes:\n  acceleratorLabel: nvidia.com/gpu.product\n  rackLabel: example.com/rack\n"
	path := filepath.Join(t.TempDir(), "gpubot.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := app.KueueSetup(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"nodeLabels:\n    nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3\n  topologyName: gpu-topology",
		"nodeLabels:\n    nvidia.com/gpu.product: nvidia-a100-80gb\n",
		"- nodeLabel: example.com/rack",
		"kind: LocalQueue\nmetadata:\n  name: vision-q\n  namespace: team-vision\nspec:\n  clusterQueue: vision",
		"kubernetes.io/metadata.name: team-vision",
		"written by `gpubot kueue-setup --config " + path + "`",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the setup lacks %q", want)
		}
	}
	if _, err := app.KueueSetup(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing configuration gave a setup")
	}
}
