module github.com/backstop-llm/backstop

go 1.25

require go.uber.org/goleak v1.3.0
