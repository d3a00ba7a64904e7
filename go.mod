module github.com/backstop-llm/backstop

go 1.25

require go.uber.org/goleak v1.3.0

require github.com/sony/gobreaker/v2 v2.4.0
