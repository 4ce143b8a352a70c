package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/gpubot/gpubot/internal/app"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

// obj is one rendered manifest.
type obj = map[string]any

func docs(t *testing.T, data []byte) []obj {
	t.Helper()
	var out []obj
	r := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var o obj
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
}

func get(o obj, path ...string) any {
	var v any = o
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func key(o obj) string {
	return fmt.Sprintf("%s %s/%s", o["kind"], get(o, "metadata", "namespace"), get(o, "metadata", "name"))
}

func find(objs []obj, kind, ns, name string) obj {
	for _, o := range objs {
		if o["kind"] == kind && get(o, "metadata", "name") == name && (ns == "*" || fmt.Sprint(get(o, "metadata", "namespace")) == ns) {
			return o
		}
	}
	return nil
}

func kustomize(t *testing.T) []byte {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "base")
	if err != nil {
		t.Fatalf("kustomize build deploy/base: %v", err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func helm(t *testing.T, values map[string]any) ([]byte, error) {
	t.Helper()
	ch, err := loader.Load("helm/gpubot")
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "gpubot", Namespace: "gpubot-system", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	}) {
		if strings.TrimSpace(files[name]) == "" || strings.HasSuffix(name, ".tpl") {
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", name, files[name])
	}
	return b.Bytes(), nil
}

// rbacOf keeps what RBAC objects grant, by kind, namespace and name.
func rbacOf(objs []obj) map[string]any {
	out := map[string]any{}
	for _, o := range objs {
		switch o["kind"] {
		case "ClusterRole", "Role":
			out[key(o)] = o["rules"]
		case "ClusterRoleBinding", "RoleBinding":
			out[key(o)] = []any{o["roleRef"], o["subjects"]}
		}
	}
	return out
}

// TestRBACFromTheConfig: deploy/base/rbac.yaml is what gpubot rbac writes
// for deploy/base/gpubot.yaml, and the Helm chart grants exactly the same
// for the same configuration.
func TestRBACFromTheConfig(t *testing.T) {
	var gen bytes.Buffer
	if err := app.RBAC(app.RBACOptions{ConfigPath: "base/gpubot.yaml"}, &gen); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(gen.String(), read(t, "base/rbac.yaml")); d != "" {
		t.Errorf("deploy/base/rbac.yaml is not what gpubot rbac --config deploy/base/gpubot.yaml writes; regenerate it (-want +got):\n%s", d)
	}
	want := rbacOf(docs(t, gen.Bytes()))
	for _, ns := range []string{"nlp", "vision", "speech"} {
		if want["Role "+ns+"/gpubot"] == nil {
			t.Errorf("no Role in team namespace %s", ns)
		}
	}
	if d := cmp.Diff(want, rbacOf(docs(t, kustomize(t)))); d != "" {
		t.Errorf("kustomize build deploy/base grants otherwise (-gpubot rbac +kustomize):\n%s", d)
	}
	out, err := helm(t, map[string]any{"config": read(t, "base/gpubot.yaml"), "slack": map[string]any{"existingSecret": "gpubot-slack"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, rbacOf(docs(t, out))); d != "" {
		t.Errorf("the Helm chart grants otherwise (-gpubot rbac +helm):\n%s", d)
	}
	// Another configuration: the Roles follow its team namespaces.
	cfg := strings.Replace(read(t, "base/gpubot.yaml"), "  - name: vision\n", "  - name: vision\n    namespace: cv-prod\n", 1)
	out, err = helm(t, map[string]any{"config": cfg, "slack": map[string]any{"existingSecret": "s"}})
	if err != nil {
		t.Fatal(err)
	}
	objs := docs(t, out)
	if find(objs, "Role", "cv-prod", "gpubot") == nil || find(objs, "Role", "vision", "gpubot") != nil {
		t.Errorf("with vision in namespace cv-prod, the chart's Roles are %v", slices.Sorted(func(yield func(string) bool) {
			for k := range rbacOf(objs) {
				if !yield(k) {
					return
				}
			}
		}))
	}
}

// TestDeploymentsRunTheExplicitMode: both renderings run gpubot slack on
// the cluster it is in, with a required Secret.
func TestDeploymentsRunTheExplicitMode(t *testing.T) {
	hout, err := helm(t, map[string]any{"slack": map[string]any{"botToken": "xoxb-1", "appToken": "xapp-1"},
		"image": map[string]any{"tag": "v1.2.3"}, "resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, objs := range map[string][]obj{"kustomize": docs(t, kustomize(t)), "helm": docs(t, hout)} {
		d := find(objs, "Deployment", "gpubot-system", "gpubot")
		if d == nil {
			t.Fatalf("%s: no Deployment gpubot in gpubot-system", name)
		}
		c := get(d, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
		args := fmt.Sprint(c["args"])
		if !strings.HasPrefix(args, "[slack --in-cluster") || !strings.Contains(args, "--http-addr=:8080") || !strings.Contains(args, "--log-format=json") {
			t.Errorf("%s: args %s, want gpubot slack --in-cluster … --http-addr=:8080 --log-format=json", name, args)
		}
		ref := get(c["envFrom"].([]any)[0].(map[string]any), "secretRef").(map[string]any)
		if ref["optional"] == true || ref["name"] == "" {
			t.Errorf("%s: the Slack secret reference %v is optional or unnamed", name, ref)
		}
		if find(objs, "ConfigMap", "gpubot-system", "*") == nil && !hasKind(objs, "ConfigMap") {
			t.Errorf("%s: no ConfigMap", name)
		}
		if !strings.HasPrefix(fmt.Sprint(c["image"]), image+":") {
			t.Errorf("%s: image %v", name, c["image"])
		}
	}
	hobjs := docs(t, hout)
	if s := find(hobjs, "Secret", "gpubot-system", "gpubot-slack"); s == nil || get(s, "stringData", "SLACK_BOT_TOKEN") != "xoxb-1" {
		t.Errorf("helm with both tokens: Secret gpubot-slack = %v", s)
	}
	d := find(hobjs, "Deployment", "gpubot-system", "gpubot")
	c := get(d, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	if c["image"] != image+":v1.2.3" || get(c, "resources", "limits", "memory") != "1Gi" {
		t.Errorf("helm values not used: image %v, resources %v", c["image"], c["resources"])
	}
}

func hasKind(objs []obj, kind string) bool {
	return slices.ContainsFunc(objs, func(o obj) bool { return o["kind"] == kind })
}

// TestHelmValues: what the chart refuses, and the optional objects.
func TestHelmValues(t *testing.T) {
	if _, err := helm(t, map[string]any{}); err == nil || !strings.Contains(err.Error(), "slack.existingSecret") {
		t.Errorf("no Slack secret: err = %v, want a failure naming slack.existingSecret", err)
	}
	if _, err := helm(t, map[string]any{"slack": map[string]any{"botToken": "xoxb-1"}}); err == nil {
		t.Error("only a bot token: rendered; want a failure")
	}
	out, err := helm(t, map[string]any{"slack": map[string]any{"existingSecret": "mine"},
		"persistence":    map[string]any{"existingClaim": "old-data"},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}}})
	if err != nil {
		t.Fatal(err)
	}
	objs := docs(t, out)
	if hasKind(objs, "Secret") || hasKind(objs, "PersistentVolumeClaim") {
		t.Error("with an existing Secret and claim, the chart still creates its own")
	}
	sm := find(objs, "ServiceMonitor", "gpubot-system", "gpubot")
	svc := find(objs, "Service", "gpubot-system", "gpubot")
	if sm == nil || svc == nil {
		t.Fatal("serviceMonitor.enabled: no ServiceMonitor (or no Service)")
	}
	// The ServiceMonitor selects the Service and scrapes its port.
	sel := get(sm, "spec", "selector", "matchLabels").(map[string]any)
	for k, v := range sel {
		if get(svc, "metadata", "labels", k) != v {
			t.Errorf("the ServiceMonitor selects %s=%v, which the Service lacks", k, v)
		}
	}
	ep := get(sm, "spec", "endpoints").([]any)[0].(map[string]any)
	port := get(svc, "spec", "ports").([]any)[0].(map[string]any)
	if ep["port"] != port["name"] || ep["path"] != "/metrics" || get(sm, "metadata", "labels", "release") != "kube-prometheus" {
		t.Errorf("ServiceMonitor endpoint %v, labels %v; Service port %v", ep, get(sm, "metadata", "labels"), port)
	}
	d := find(objs, "Deployment", "gpubot-system", "gpubot")
	if claim := get(d["spec"].(map[string]any), "template", "spec", "volumes").([]any)[1].(map[string]any); get(claim, "persistentVolumeClaim", "claimName") != "old-data" {
		t.Errorf("the data volume is %v, want the existing claim old-data", claim)
	}
}

// TestManifestsValidAgainstTheAPIServer sends both renderings to a real
// kube-apiserver as a server-side dry run with strict field validation:
// every object is checked against Kubernetes's OpenAPI schemas (an
// unknown or misplaced field fails). The ServiceMonitor is left out: its
// CRD is prometheus-operator's, which the test cluster does not have.
func TestManifestsValidAgainstTheAPIServer(t *testing.T) {
	if k8senv.Skipped() || testing.Short() {
		t.Skipf("needs the cached Kubernetes binaries (unset %s and drop -short)", k8senv.SkipEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := k8senv.Start(ctx, k8senv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	// The namespaces the objects go to must exist (the Kueue setup
	// creates the team namespaces).
	var ns bytes.Buffer
	for _, n := range []string{"gpubot-system", "nlp", "vision", "speech", "kueue-system"} {
		fmt.Fprintf(&ns, "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", n)
	}
	if _, err := k8senv.Apply(ctx, env.Config, ns.Bytes(), ""); err != nil {
		t.Fatal(err)
	}
	hout, err := helm(t, map[string]any{"slack": map[string]any{"botToken": "xoxb-1", "appToken": "xapp-1"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"kustomize build deploy/base": kustomize(t), "helm template deploy/helm/gpubot": hout} {
		if err := k8senv.Validate(ctx, env.Config, data, ""); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The check has teeth: a misplaced field is refused.
	bad := strings.Replace(string(kustomize(t)), "replicas: 1", "replicas: 1\n  replica: 1", 1)
	if err := k8senv.Validate(ctx, env.Config, []byte(bad), ""); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Errorf("a Deployment with an unknown field passed validation: %v", err)
	}
}
