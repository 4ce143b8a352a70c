package deploy_test

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// image is the one name of gpubot's container image.
const image = "ghcr.io/gpubot/gpubot"

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestOneImageName: README, Makefile, Dockerfile, the kustomize base and
// the Helm chart name the same image, and no other.
func TestOneImageName(t *testing.T) {
	ref := regexp.MustCompile(`(?:ghcr\.io|docker\.io|quay\.io)/[\w./-]*gpubot[\w./-]*`)
	for _, f := range []string{"../README.md", "../Makefile", "../Dockerfile", "base/deployment.yaml", "base/kustomization.yaml", "helm/gpubot/values.yaml"} {
		text := read(t, f)
		found := ref.FindAllString(text, -1)
		if len(found) == 0 {
			t.Errorf("%s does not name the image %s", f, image)
		}
		for _, r := range found {
			if r != image {
				t.Errorf("%s names the image %q, not %s", f, r, image)
			}
		}
	}
}

// TestDockerfile checks what can be checked without a Docker engine: a
// multi-stage build with every base pinned by digest, a static binary
// with the version stamped in, a distroless non-root final stage, and a
// .dockerignore; then it runs the build stage's go build and checks that
// the binary is static and prints the stamped version.
func TestDockerfile(t *testing.T) {
	df := read(t, "../Dockerfile")
	from := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(from) < 2 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and a final one", len(from))
	}
	for _, f := range from {
		if !regexp.MustCompile(`@sha256:[0-9a-f]{64}$`).MatchString(f[1]) {
			t.Errorf("base image %s is not pinned by digest", f[1])
		}
	}
	if final := from[len(from)-1][1]; !strings.HasPrefix(final, "gcr.io/distroless/static") || !strings.Contains(final, ":nonroot@") {
		t.Errorf("the final stage is %s, want gcr.io/distroless/static…:nonroot", final)
	}
	if !regexp.MustCompile(`(?m)^USER\s+(65532|nonroot)`).MatchString(df) {
		t.Error("the final stage does not run as the non-root user 65532")
	}
	run := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 .*go build .*)$`).FindStringSubmatch(df)
	if run == nil || !strings.Contains(run[1], "-X main.version=${VERSION}") || !regexp.MustCompile(`(?m)^ARG VERSION`).MatchString(df) {
		t.Fatalf("no static go build stamping main.version from ARG VERSION in the Dockerfile:\n%s", df)
	}
	ignore := read(t, "../.dockerignore")
	for _, want := range []string{".git", "bin"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).MatchString(ignore) {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
	if testing.Short() {
		t.Skip("-short: not building the binary")
	}
	out := t.TempDir()
	cmd := strings.ReplaceAll(run[1], "/out/gpubot", filepath.Join(out, "gpubot"))
	build := exec.Command("sh", "-c", cmd)
	build.Dir = ".."
	build.Env = append(os.Environ(), "VERSION=v9.8.7-test")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	bin := filepath.Join(out, "gpubot")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a dynamic loader (PT_INTERP): it is not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v: it is not static", libs)
	}
	v, err := exec.Command(bin, "version").Output()
	if err != nil || strings.TrimSpace(string(v)) != "gpubot v9.8.7-test" {
		t.Errorf("gpubot version = %q (%v), want the stamped gpubot v9.8.7-test", v, err)
	}
}

// TestMakeHelp: every target of the Makefile is in make help, with its
// description in one aligned column.
func TestMakeHelp(t *testing.T) {
	mk := read(t, "../Makefile")
	phony := regexp.MustCompile(`(?m)^\.PHONY:(.*)$`).FindStringSubmatch(mk)
	if phony == nil {
		t.Fatal("no .PHONY line")
	}
	out, err := exec.Command("make", "-s", "-C", "..", "help").Output()
	if err != nil {
		t.Fatalf("make help: %v", err)
	}
	col := -1
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		m := regexp.MustCompile(`^  (\S+)(\s+)\S`).FindStringSubmatchIndex(line)
		if m == nil {
			t.Errorf("make help line %q is not '  target  description'", line)
			continue
		}
		listed[line[m[2]:m[3]]] = true
		if c := m[5]; col < 0 {
			col = c
		} else if c != col {
			t.Errorf("make help: descriptions are not aligned (column %d, then %d in %q)", col, c, line)
		}
	}
	for _, target := range strings.Fields(phony[1]) {
		if !listed[target] {
			t.Errorf("make help does not list %s", target)
		}
	}
	if !bytes.Contains(out, []byte("k8s-assets")) {
		t.Error("make help omits k8s-assets")
	}
}
