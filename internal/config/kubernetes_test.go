package config

import (
	"strings"
	"testing"

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
