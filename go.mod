module github.com/backstop-llm/backstop

go 1.25

require go.uber.org/goleak v1.3.0

require github.com/sony/gobreaker/v2 v2.4.0

require (
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	golang.org/x/text v0.14.0
)
