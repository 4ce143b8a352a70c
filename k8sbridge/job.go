package k8sbridge

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// JobName is the name of the Job of request id: deterministic, so that
// creating it twice finds the first one.
func JobName(id string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := "gpubot-" + strings.Trim(b.String(), "-")
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	return name
}

// jobSpec is everything a request's Job is made from.
type jobSpec struct {
	w        allocator.Workload
	rec      records.Request // may be zero
	team     Team
	priority string            // WorkloadPriorityClass name, or ""
	gpn      int               // GPUs per node of the flavor that decides the pod shape
	selector map[string]string // node labels of the pinned flavor
	// keepOff keeps the Job off the elastic flavors but its own.
	keepOff   []corev1.NodeSelectorRequirement
	topoLabel string // node label of the required topology level, or ""
	template  []byte
}

// buildJob makes the suspended Job for a request from its template.
func buildJob(s jobSpec, gpuResource string) (*batchv1.Job, error) {
	tmpl := s.template
	if len(tmpl) == 0 {
		tmpl = []byte(DefaultJobTemplate)
	}
	j := &batchv1.Job{}
	if err := yaml.UnmarshalStrict(tmpl, j); err != nil {
		return nil, fmt.Errorf("reading the Job template %q: %w", s.rec.Template, err)
	}
	if len(j.Spec.Template.Spec.Containers) == 0 {
		return nil, fmt.Errorf("the Job template %q has no container", s.rec.Template)
	}
	pods, per, err := allocator.PodShape(s.w.GPUs, s.gpn)
	if err != nil {
		return nil, fmt.Errorf("splitting %d GPUs into pods: %w", s.w.GPUs, err)
	}
	j.APIVersion, j.Kind = "batch/v1", "Job"
	j.Name, j.Namespace, j.GenerateName = JobName(s.w.ID), s.team.Namespace, ""
	set := func(m *map[string]string, k, v string) {
		if v == "" {
			return
		}
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[k] = v
	}
	set(&j.Labels, LabelRequest, s.w.ID)
	set(&j.Labels, LabelQueueName, s.team.LocalQueue)
	set(&j.Labels, LabelPriorityClass, s.priority)
	if s.w.Duration > 0 {
		set(&j.Labels, LabelMaxExecTime, strconv.FormatInt(int64(s.w.Duration/time.Second), 10))
	}
	set(&j.Annotations, AnnotationRequester, s.rec.Requester)
	set(&j.Annotations, AnnotationTeam, s.team.Name)
	set(&j.Annotations, AnnotationThread, s.rec.Channel)
	set(&j.Annotations, AnnotationGPUs, strconv.Itoa(s.w.GPUs))
	set(&j.Annotations, AnnotationFlavor, s.w.Flavor)
	set(&j.Annotations, AnnotationPriority, s.rec.Priority)
	if s.w.Duration > 0 {
		set(&j.Annotations, AnnotationDuration, s.w.Duration.String())
	}
	set(&j.Annotations, AnnotationTopology, s.w.Topology.String())
	set(&j.Annotations, AnnotationTemplate, s.rec.Template)
	if !s.w.Created.IsZero() {
		set(&j.Annotations, AnnotationCreated, s.w.Created.UTC().Format(time.RFC3339Nano))
	}
	set(&j.Annotations, AnnotationOrigin, "submitted")
	set(&j.Annotations, AnnotationReason, s.rec.Reason)

	j.Spec.Suspend = ptr.To(true)
	j.Spec.Parallelism = ptr.To(int32(pods))
	j.Spec.Completions = ptr.To(int32(pods))
	pt := &j.Spec.Template
	set(&pt.Labels, LabelRequest, s.w.ID)
	set(&pt.Annotations, AnnotationTASRequired, s.topoLabel)
	for k, v := range s.selector {
		set(&pt.Spec.NodeSelector, k, v)
	}
	if len(s.keepOff) > 0 {
		pt.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: s.keepOff}}}}}
	}
	if pt.Spec.RestartPolicy == "" {
		pt.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	c := &pt.Spec.Containers[0]
	q := *resource.NewQuantity(int64(per), resource.DecimalSI)
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Requests[corev1.ResourceName(gpuResource)] = q
	c.Resources.Limits[corev1.ResourceName(gpuResource)] = q
	// The CPU and memory the request asks for (requests.cpuPerGPU,
	// memoryPerGPU), split over its pods, replace the template's.
	if s.w.CPU > 0 {
		c.Resources.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(s.w.CPU/int64(pods), resource.DecimalSI)
	}
	if s.w.Memory > 0 {
		c.Resources.Requests[corev1.ResourceMemory] = *resource.NewQuantity(s.w.Memory/int64(pods), resource.BinarySI)
	}
	return j, nil
}
