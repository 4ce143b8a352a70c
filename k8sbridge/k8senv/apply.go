package k8senv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// ApplyFile applies every object of a multi-document YAML file with
// server-side apply (as kubectl apply --server-side --force-conflicts).
// namespace, if set, is used for namespaced objects that name none.
func ApplyFile(ctx context.Context, cfg *rest.Config, path, namespace string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Apply(ctx, cfg, data, namespace)
}

// Apply is ApplyFile on YAML text.
func Apply(ctx context.Context, cfg *rest.Config, data []byte, namespace string) ([]*unstructured.Unstructured, error) {
	return apply(ctx, cfg, data, namespace, metav1.PatchOptions{FieldManager: "gpubot-k8senv", Force: ptrTrue()})
}

// Validate sends every object of the YAML text to the API server as a
// server-side apply with dry run and strict field validation, as
// kubectl apply --server-side --dry-run=server --validate=strict: the
// server checks each against its OpenAPI schema (unknown or duplicate
// fields are errors) and admission, and stores nothing. Namespaced
// objects need their namespace to exist.
func Validate(ctx context.Context, cfg *rest.Config, data []byte, namespace string) error {
	_, err := apply(ctx, cfg, data, namespace, metav1.PatchOptions{FieldManager: "gpubot-k8senv", Force: ptrTrue(),
		DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	return err
}

func apply(ctx context.Context, cfg *rest.Config, data []byte, namespace string, opts metav1.PatchOptions) ([]*unstructured.Unstructured, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, err
		}
		obj := &unstructured.Unstructured{}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return out, err
		}
		if len(bytes.TrimSpace(j)) == 0 || string(j) == "null" {
			continue
		}
		if err := obj.UnmarshalJSON(j); err != nil {
			return out, err
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return out, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		ri := dyn.Resource(m.Resource)
		var res dynamic.ResourceInterface = ri
		if m.Scope.Name() == "namespace" {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = namespace
			}
			obj.SetNamespace(ns)
			res = ri.Namespace(ns)
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			return out, err
		}
		got, err := res.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
		if err != nil {
			return out, fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		out = append(out, got)
	}
	return out, nil
}

func ptrTrue() *bool { t := true; return &t }

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
