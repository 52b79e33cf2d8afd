package config

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ConfigMapKey is the key of the chart's ConfigMap that holds the
// WebhookConfiguration file (charts/spreadguard/templates/webhook-configmap.yaml).
const ConfigMapKey = "config.yaml"

// The labels the chart puts on every object of a release, which find its
// ConfigMap whatever its name (the chart's fullname depends on values).
const (
	labelInstance = "app.kubernetes.io/instance"
	labelPartOf   = "app.kubernetes.io/part-of"
	partOf        = "spreadguard"
)

// FromRelease reads the WebhookConfiguration of the Helm release called
// release in namespace: the one ConfigMap of the release that holds
// ConfigMapKey, decoded as the webhook decodes its --config file (Decode).
// source names the ConfigMap, for messages.
func FromRelease(ctx context.Context, r client.Reader, namespace, release string) (cfg *WebhookConfiguration, source string, err error) {
	var list v1.ConfigMapList
	if err := r.List(ctx, &list, client.InNamespace(namespace),
		client.MatchingLabels{labelInstance: release, labelPartOf: partOf}); err != nil {
		return nil, "", fmt.Errorf("listing the ConfigMaps of release %s in namespace %s: %w", release, namespace, err)
	}
	var found []*v1.ConfigMap
	for i := range list.Items {
		if _, ok := list.Items[i].Data[ConfigMapKey]; ok {
			found = append(found, &list.Items[i])
		}
	}
	switch len(found) {
	case 0:
		return nil, "", fmt.Errorf("release %s in namespace %s has no ConfigMap labelled %s=%s, %s=%s with the key %s: "+
			"is spreadguard installed under that name there? (helm list -A)",
			release, namespace, labelInstance, release, labelPartOf, partOf, ConfigMapKey)
	case 1:
	default:
		names := make([]string, len(found))
		for i, cm := range found {
			names[i] = cm.Name
		}
		slices.Sort(names)
		return nil, "", fmt.Errorf("release %s in namespace %s has %d ConfigMaps with the key %s (%s), want one",
			release, namespace, len(found), ConfigMapKey, strings.Join(names, ", "))
	}
	cm := found[0]
	source = fmt.Sprintf("ConfigMap %s/%s key %s", cm.Namespace, cm.Name, ConfigMapKey)
	cfg, err = Decode(source, []byte(cm.Data[ConfigMapKey]))
	if err != nil {
		return nil, "", err
	}
	return cfg, source, nil
}
