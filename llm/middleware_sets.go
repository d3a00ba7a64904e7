package llm

// This file holds the one struct type per set of optional interfaces that
// Wrap needs: Go has no other way to give a value a method set chosen at
// run time. The cases are in the order of their bits (see hasStream);
// TestWrapForwardsExactly checks each.

// as returns w as a provider with exactly the optional interfaces in has:
// one struct type for each set, embedding the types that carry them.
func (w *wrapped) as(has uint8) Provider {
	s, c, m, k := (*streams)(w), (*capable)(w), (*media)(w), (*checks)(w)
	d, md := (*deployed)(w), (*modelDeployed)(w)
	switch has {
	case 0:
		return struct{ *wrapped }{w}
	case hasStream:
		return struct {
			*wrapped
			*streams
		}{w, s}
	case hasCaps:
		return struct {
			*wrapped
			*capable
		}{w, c}
	case hasStream | hasCaps:
		return struct {
			*wrapped
			*streams
			*capable
		}{w, s, c}
	case hasMedia:
		return struct {
			*wrapped
			*media
		}{w, m}
	case hasStream | hasMedia:
		return struct {
			*wrapped
			*streams
			*media
		}{w, s, m}
	case hasCaps | hasMedia:
		return struct {
			*wrapped
			*capable
			*media
		}{w, c, m}
	case hasStream | hasCaps | hasMedia:
		return struct {
			*wrapped
			*streams
			*capable
			*media
		}{w, s, c, m}
	case hasSchema:
		return struct {
			*wrapped
			*checks
		}{w, k}
	case hasStream | hasSchema:
		return struct {
			*wrapped
			*streams
			*checks
		}{w, s, k}
	case hasCaps | hasSchema:
		return struct {
			*wrapped
			*capable
			*checks
		}{w, c, k}
	case hasStream | hasCaps | hasSchema:
		return struct {
			*wrapped
			*streams
			*capable
			*checks
		}{w, s, c, k}
	case hasMedia | hasSchema:
		return struct {
			*wrapped
			*media
			*checks
		}{w, m, k}
	case hasStream | hasMedia | hasSchema:
		return struct {
			*wrapped
			*streams
			*media
			*checks
		}{w, s, m, k}
	case hasCaps | hasMedia | hasSchema:
		return struct {
			*wrapped
			*capable
			*media
			*checks
		}{w, c, m, k}
	case hasStream | hasCaps | hasMedia | hasSchema:
		return struct {
			*wrapped
			*streams
			*capable
			*media
			*checks
		}{w, s, c, m, k}
	case hasDeployment:
		return struct {
			*wrapped
			*deployed
		}{w, d}
	case hasStream | hasDeployment:
		return struct {
			*wrapped
			*streams
			*deployed
		}{w, s, d}
	case hasCaps | hasDeployment:
		return struct {
			*wrapped
			*capable
			*deployed
		}{w, c, d}
	case hasStream | hasCaps | hasDeployment:
		return struct {
			*wrapped
			*streams
			*capable
			*deployed
		}{w, s, c, d}
	case hasMedia | hasDeployment:
		return struct {
			*wrapped
			*media
			*deployed
		}{w, m, d}
	case hasStream | hasMedia | hasDeployment:
		return struct {
			*wrapped
			*streams
			*media
			*deployed
		}{w, s, m, d}
	case hasCaps | hasMedia | hasDeployment:
		return struct {
			*wrapped
			*capable
			*media
			*deployed
		}{w, c, m, d}
	case hasStream | hasCaps | hasMedia | hasDeployment:
		return struct {
			*wrapped
			*streams
			*capable
			*media
			*deployed
		}{w, s, c, m, d}
	case hasSchema | hasDeployment:
		return struct {
			*wrapped
			*checks
			*deployed
		}{w, k, d}
	case hasStream | hasSchema | hasDeployment:
		return struct {
			*wrapped
			*streams
			*checks
			*deployed
		}{w, s, k, d}
	case hasCaps | hasSchema | hasDeployment:
		return struct {
			*wrapped
			*capable
			*checks
			*deployed
		}{w, c, k, d}
	case hasStream | hasCaps | hasSchema | hasDeployment:
		return struct {
			*wrapped
			*streams
			*capable
			*checks
			*deployed
		}{w, s, c, k, d}
	case hasMedia | hasSchema | hasDeployment:
		return struct {
			*wrapped
			*media
			*checks
			*deployed
		}{w, m, k, d}
	case hasStream | hasMedia | hasSchema | hasDeployment:
		return struct {
			*wrapped
			*streams
			*media
			*checks
			*deployed
		}{w, s, m, k, d}
	case hasCaps | hasMedia | hasSchema | hasDeployment:
		return struct {
			*wrapped
			*capable
			*media
			*checks
			*deployed
		}{w, c, m, k, d}
	case hasStream | hasCaps | hasMedia | hasSchema | hasDeployment:
		return struct {
			*wrapped
			*streams
			*capable
			*media
			*checks
			*deployed
		}{w, s, c, m, k, d}
	case hasModelDeployment:
		return struct {
			*wrapped
			*modelDeployed
		}{w, md}
	case hasStream | hasModelDeployment:
		return struct {
			*wrapped
			*streams
			*modelDeployed
		}{w, s, md}
	case hasCaps | hasModelDeployment:
		return struct {
			*wrapped
			*capable
			*modelDeployed
		}{w, c, md}
	case hasStream | hasCaps | hasModelDeployment:
		return struct {
			*wrapped
			*streams
			*capable
			*modelDeployed
		}{w, s, c, md}
	case hasMedia | hasModelDeployment:
		return struct {
			*wrapped
			*media
			*modelDeployed
		}{w, m, md}
	case hasStream | hasMedia | hasModelDeployment:
		return struct {
			*wrapped
			*streams
			*media
			*modelDeployed
		}{w, s, m, md}
	case hasCaps | hasMedia | hasModelDeployment:
		return struct {
			*wrapped
			*capable
			*media
			*modelDeployed
		}{w, c, m, md}
	case hasStream | hasCaps | hasMedia | hasModelDeployment:
		return struct {
			*wrapped
			*streams
			*capable
			*media
			*modelDeployed
		}{w, s, c, m, md}
	case hasSchema | hasModelDeployment:
		return struct {
			*wrapped
			*checks
			*modelDeployed
		}{w, k, md}
	case hasStream | hasSchema | hasModelDeployment:
		return struct {
			*wrapped
			*streams
			*checks
			*modelDeployed
		}{w, s, k, md}
	case hasCaps | hasSchema | hasModelDeployment:
		return struct {
			*wrapped
			*capable
			*checks
			*modelDeployed
		}{w, c, k, md}
	case hasStream | hasCaps | hasSchema | hasModelDeployment:
		return struct {
			*wrapped
			*streams
			*capable
			*checks
			*modelDeployed
		}{w, s, c, k, md}
	case hasMedia | hasSchema | hasModelDeployment:
		return struct {
			*wrapped
			*media
			*checks
			*modelDeployed
		}{w, m, k, md}
	case hasStream | hasMedia | hasSchema | hasModelDeployment:
		return struct {
			*wrapped
			*streams
			*media
			*checks
			*modelDeployed
		}{w, s, m, k, md}
	case hasCaps | hasMedia | hasSchema | hasModelDeployment:
		return struct {
			*wrapped
			*capable
			*media
			*checks
			*modelDeployed
		}{w, c, m, k, md}
	case hasStream | hasCaps | hasMedia | hasSchema | hasModelDeployment:
		return struct {
			*wrapped
			*streams
			*capable
			*media
			*checks
			*modelDeployed
		}{w, s, c, m, k, md}
	}
	panic("llm.Wrap: no provider type for this set of interfaces")
}
