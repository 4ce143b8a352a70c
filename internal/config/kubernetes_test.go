package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/deploy"
)

func TestKubernetesSettings(t *testing.T) {
	src := strings.Replace(string(deploy.ExampleConfig), "  - name: nlp\n", "  - name: nlp\n    namespace: team-nlp\n    localQueue: nlp-queue\n", 1)
	src += `
kubernetes:
  gpuResource: nvidia.com/gpu
  rackLabel: example.com/rack
  jobTemplates:
    pytorch-ddp:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            containers: [{name: train, image: example.com/train:1}]
`
	c, err := Parse("gpubot.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Kubernetes()
	if d := cmp.Diff(map[string]string{"nlp": "team-nlp"}, k.Namespaces); d != "" {
		t.Errorf("namespaces (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"nlp": "nlp-queue"}, k.LocalQueues); d != "" {
		t.Errorf("local queues (-want +got):\n%s", d)
	}
	if k.GPUResource != "nvidia.com/gpu" || k.RackLabel != "example.com/rack" {
		t.Errorf("labels %+v", k)
	}
	if tmpl := string(k.JobTemplates["pytorch-ddp"]); !strings.Contains(tmpl, "example.com/train:1") {
		t.Errorf("template:\n%s", tmpl)
	}

	bad := string(deploy.ExampleConfig) + "\nkubernetes:\n  jobTemplates:\n    nope: {kind: Job}\n"
	_, err = Parse("gpubot.yaml", []byte(bad))
	if err == nil || !strings.Contains(err.Error(), "kubernetes.jobTemplates.nope") {
		t.Errorf("unknown template: %v", err)
	}
}

func TestKubernetesPodsReadyTimeout(t *testing.T) {
	c, err := Parse("gpubot.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Kubernetes().PodsReadyTimeout; got != 0 {
		t.Errorf("default: %s, want 0 (the bridge's 10 minutes)", got)
	}
	c, err = Parse("gpubot.yaml", []byte(minimal+"kubernetes:\n  podsReadyTimeout: 1h30m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Kubernetes().PodsReadyTimeout; got != 90*time.Minute {
		t.Errorf("podsReadyTimeout: %s, want 1h30m", got)
	}

	for value, want := range map[string]string{
		"0m":                         `gpubot.yaml:6:21: kubernetes.podsReadyTimeout: invalid duration "0m": must be more than zero`,
		"-5m":                        `gpubot.yaml:6:21: kubernetes.podsReadyTimeout: invalid duration "-5m": negative durations are not allowed`,
		"30s":                        `gpubot.yaml:6:21: kubernetes.podsReadyTimeout: invalid duration "30s": unknown unit 's' (use m, h or d)`,
		"10":                         "gpubot.yaml:6:21: kubernetes.podsReadyTimeout: must be a duration like 90m, 6h or 2d, not the integer 10",
		"{m: 10}":                    "gpubot.yaml:6:21: kubernetes.podsReadyTimeout: must be a duration like 90m, 6h or 2d, not a mapping",
		`"often"`:                    `gpubot.yaml:6:21: kubernetes.podsReadyTimeout: invalid duration "often"`,
		"[10m]":                      "gpubot.yaml:6:21: kubernetes.podsReadyTimeout: must be a duration like 90m, 6h or 2d, not a list",
		"10m\n  podReadyTimeout: 5m": `gpubot.yaml:7:3: kubernetes.podReadyTimeout: unknown key "podReadyTimeout"; did you mean "podsReadyTimeout"?`,
	} {
		_, err := Parse("gpubot.yaml", []byte(minimal+"kubernetes:\n  podsReadyTimeout: "+value+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("podsReadyTimeout: %s: got %v, want an error with %q", value, err, want)
		}
	}
}

// Flavors say which nodes are theirs: by the accelerator label's value
// (GKE's label unless kubernetes.acceleratorLabel names another, such as
// the NVIDIA GPU operator's), or by node labels.
func TestFlavorNodeLabels(t *testing.T) {
	c, err := Parse("gpubot.yaml", deploy.ExampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"h100":      {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
		"a100":      {"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"},
		"h100-spot": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb", "cloud.google.com/gke-spot": "true"},
		"h100-dws":  {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb", "cloud.google.com/gke-queued": "true"},
	}
	if d := cmp.Diff(want, c.Kubernetes().FlavorLabels()); d != "" {
		t.Errorf("example (-want +got):\n%s", d)
	}
	src := strings.NewReplacer(
		"accelerator: nvidia-h100-80gb", "accelerator: NVIDIA-H100-80GB-HBM3",
		"accelerator: nvidia-a100-80gb", "nodeLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB, cloud.google.com/gke-spot: \"true\"}",
	).Replace(string(deploy.ExampleConfig)) + "kubernetes:\n  acceleratorLabel: nvidia.com/gpu.product\n"
	c, err = Parse("gpubot.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]map[string]string{
		"h100":      {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
		"a100":      {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "cloud.google.com/gke-spot": "true"},
		"h100-spot": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb", "cloud.google.com/gke-spot": "true"},
		"h100-dws":  {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb", "cloud.google.com/gke-queued": "true"},
	}
	if d := cmp.Diff(want, c.Kubernetes().FlavorLabels()); d != "" {
		t.Errorf("GPU operator labels (-want +got):\n%s", d)
	}
	for name, tc := range map[string]struct{ from, to, want string }{
		"both":        {"accelerator: nvidia-h100-80gb", "accelerator: x\n    nodeLabels: {a: b}", "flavors[0].nodeLabels: give accelerator or nodeLabels, not both"},
		"bad value":   {"accelerator: nvidia-h100-80gb", "accelerator: \"NVIDIA H100\"", `flavors[0].accelerator: "NVIDIA H100" is not a valid node label value`},
		"bad key":     {"accelerator: nvidia-h100-80gb", "nodeLabels: {\"-bad/key\": x}", `flavors[0].nodeLabels.-bad/key: "-bad/key" is not a valid node label name`},
		"bad acclbl":  {"defaultChannel:", "kubernetes: {acceleratorLabel: \"no spaces allowed\"}\ndefaultChannel:", `kubernetes.acceleratorLabel: "no spaces allowed" is not a valid node label name`},
		"bad kueuens": {"defaultChannel:", "kubernetes: {kueueNamespace: Kueue_System}\ndefaultChannel:", `kubernetes.kueueNamespace: "Kueue_System" is not a valid namespace name`},
	} {
		_, err := Parse("gpubot.yaml", []byte(strings.Replace(string(deploy.ExampleConfig), tc.from, tc.to, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", name, err, tc.want)
		}
	}
}
