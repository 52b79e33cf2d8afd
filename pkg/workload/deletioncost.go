package workload

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// DeletionCost is a pod's controller.kubernetes.io/pod-deletion-cost as the
// ReplicaSet controller reads it before it compares two pods: 0 and no error
// when annotations carry none; a decimal int32 without a plus sign or
// leading zeros ("-0" is one); else 0 and the error, and the controller
// ranks the pod at 0. It mirrors GetDeletionCostFromPodAnnotations of
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/apis/core/helper/helpers.go,
// which ActivePodsWithRanks.Less of
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/controller_utils.go
// calls. The cache, the keeper and the forecast all read a cost here, so
// that none believes in a cost the controller ignores.
func DeletionCost(annotations map[string]string) (int32, error) {
	value, ok := annotations[v1.PodDeletionCost]
	if !ok {
		return 0, nil
	}
	// validFirstDigit: a plus sign ("+10") or a leading zero ("008") is
	// not valid, though strconv would take it.
	if value == "" || !(value[0] == '-' || value == "0" || (value[0] >= '1' && value[0] <= '9')) {
		return 0, fmt.Errorf("invalid pod-deletion-cost %q", value)
	}
	n, err := strconv.ParseInt(value, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid pod-deletion-cost: %w", err)
	}
	return int32(n), nil
}
