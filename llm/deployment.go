package llm

// Deployment says where a provider serves models: the platform and the
// region requests go to. A chain reads it (DeployedProvider) to tell that
// targets on different platforms serve the same model, and where a target
// processes data when its Region is not set.
type Deployment struct {
	// Platform is the service: "anthropic", "bedrock", "vertex",
	// "openai", "azure", "gemini", or a compatible server's name.
	Platform string
	// Region is the cloud region requests go to ("eu-west-1",
	// "europe-west4", "westeurope"); empty when the platform does not say
	// (the Anthropic and OpenAI APIs).
	Region string
}

// DeployedProvider is a Provider that says where it is deployed.
type DeployedProvider interface {
	Provider
	Deployment() Deployment
}

// ModelDeployedProvider is a DeployedProvider whose deployment depends on
// the model a request names: a Bedrock model or inference-profile ARN names
// its region, which may not be the one the provider was configured with. A
// chain asks it at Build, for each target, with the target's Model.
type ModelDeployedProvider interface {
	DeployedProvider
	// ModelDeployment returns where a request for model is served. It
	// fails, naming both, when model contradicts the provider's
	// Deployment (an ARN of another region than the one the provider
	// sends to); Build reports that as the target's problem.
	ModelDeployment(model string) (Deployment, error)
}
