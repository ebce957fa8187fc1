// The OpenAPI 3.1 document of the HTTP API, served at /api/v1/openapi.json. A copy is kept
// in docs/api/openapi.json; APITests checks the two are the same and that the server does
// what it says. Edit both together.
enum APIDocument {
    static let json = #"""
{
  "components": {
    "responses": {
      "Error": {
        "content": {
          "application/json": {
            "schema": {
              "$ref": "#/components/schemas/Error"
            }
          }
        },
        "description": "An error: its code and reason."
      }
    },
    "schemas": {
      "Error": {
        "properties": {
          "error": {
            "properties": {
              "code": {
                "type": "string"
              },
              "message": {
                "type": "string"
              }
            },
            "required": [
              "code",
              "message"
            ],
            "type": "object"
          }
        },
        "required": [
          "error"
        ],
        "type": "object"
      },
      "Job": {
        "allOf": [
          {
            "$ref": "#/components/schemas/JobStatus"
          },
          {
            "properties": {
              "etaSeconds": {
                "type": "number"
              },
              "progress": {
                "maximum": 1,
                "minimum": 0,
                "type": "number"
              },
              "tasksPerSecond": {
                "type": "number"
              }
            },
            "required": [
              "progress"
            ],
            "type": "object"
          }
        ]
      },
      "JobFile": {
        "additionalProperties": true,
        "description": "A job file (docs: the README's job files), as JSON or YAML.",
        "type": "object"
      },
      "JobList": {
        "properties": {
          "jobs": {
            "items": {
              "$ref": "#/components/schemas/JobStatus"
            },
            "type": "array"
          }
        },
        "required": [
          "jobs"
        ],
        "type": "object"
      },
      "JobStatus": {
        "properties": {
          "cancelled": {
            "type": "integer"
          },
          "failed": {
            "type": "integer"
          },
          "finishedUnixSeconds": {
            "type": "number"
          },
          "id": {
            "type": "string"
          },
          "kind": {
            "type": "string"
          },
          "name": {
            "type": "string"
          },
          "pending": {
            "type": "integer"
          },
          "priority": {
            "type": "integer"
          },
          "running": {
            "type": "integer"
          },
          "skipped": {
            "type": "integer"
          },
          "state": {
            "enum": [
              "queued",
              "running",
              "succeeded",
              "failed",
              "cancelled"
            ],
            "type": "string"
          },
          "submittedUnixSeconds": {
            "type": "number"
          },
          "succeeded": {
            "type": "integer"
          },
          "total": {
            "type": "integer"
          }
        },
        "required": [
          "id",
          "name",
          "kind",
          "priority",
          "state",
          "total",
          "pending",
          "running",
          "succeeded",
          "failed",
          "skipped",
          "cancelled",
          "submittedUnixSeconds"
        ],
        "type": "object"
      },
      "Retried": {
        "properties": {
          "job": {
            "type": "string"
          },
          "retried": {
            "type": "integer"
          }
        },
        "required": [
          "job",
          "retried"
        ],
        "type": "object"
      },
      "Submitted": {
        "properties": {
          "job": {
            "type": "string"
          },
          "planMilliseconds": {
            "type": "number"
          },
          "skippedFiles": {
            "additionalProperties": {
              "type": "integer"
            },
            "type": "object"
          },
          "tasks": {
            "type": "integer"
          }
        },
        "required": [
          "job",
          "tasks",
          "planMilliseconds"
        ],
        "type": "object"
      }
    },
    "securitySchemes": {
      "bearer": {
        "description": "A token from `tessera token create NAME --role client|admin --dir DIR`.",
        "scheme": "bearer",
        "type": "http"
      }
    }
  },
  "info": {
    "description": "Submit image jobs, follow them, page their results and cancel them over HTTP (docs/API.md). Every route but this document needs `Authorization: Bearer TOKEN` unless the coordinator runs with --api-insecure.",
    "title": "Tessera coordinator API",
    "version": "1"
  },
  "openapi": "3.1.0",
  "paths": {
    "/api/v1/jobs": {
      "get": {
        "parameters": [
          {
            "in": "query",
            "name": "state",
            "schema": {
              "enum": [
                "queued",
                "running",
                "succeeded",
                "failed",
                "cancelled"
              ],
              "type": "string"
            }
          },
          {
            "in": "query",
            "name": "limit",
            "schema": {
              "default": 50,
              "maximum": 1000,
              "minimum": 1,
              "type": "integer"
            }
          },
          {
            "description": "Jobs to pass over (the next page's Link says how many).",
            "in": "query",
            "name": "offset",
            "schema": {
              "default": 0,
              "minimum": 0,
              "type": "integer"
            }
          }
        ],
        "responses": {
          "200": {
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/JobList"
                }
              }
            },
            "description": "The jobs.",
            "headers": {
              "Link": {
                "description": "<…offset=…>; rel=\"next\" when the page is full",
                "schema": {
                  "type": "string"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "405": {
            "$ref": "#/components/responses/Error"
          },
          "500": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "summary": "The caller's jobs (an admin's: all), the most recent first."
      },
      "post": {
        "parameters": [
          {
            "description": "What relative paths in the job resolve against (absolute); default: the coordinator's working directory.",
            "in": "header",
            "name": "X-Job-Directory",
            "schema": {
              "type": "string"
            }
          }
        ],
        "requestBody": {
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/JobFile"
              }
            },
            "application/yaml": {
              "schema": {
                "type": "string"
              }
            }
          },
          "required": true
        },
        "responses": {
          "201": {
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Submitted"
                }
              }
            },
            "description": "Planned and queued.",
            "headers": {
              "Location": {
                "description": "/api/v1/jobs/ID",
                "schema": {
                  "type": "string"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "405": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "422": {
            "$ref": "#/components/responses/Error"
          },
          "429": {
            "$ref": "#/components/responses/Error"
          },
          "500": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "summary": "Submit a job."
      }
    },
    "/api/v1/jobs/{id}": {
      "delete": {
        "responses": {
          "200": {
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Job"
                }
              }
            },
            "description": "The job, cancelled (or as it ended)."
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "500": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "summary": "Cancel the job."
      },
      "get": {
        "responses": {
          "200": {
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Job"
                }
              }
            },
            "description": "The job."
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "500": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "summary": "One job, with its progress and ETA."
      },
      "parameters": [
        {
          "description": "The job id (`j-…`).",
          "in": "path",
          "name": "id",
          "required": true,
          "schema": {
            "type": "string"
          }
        }
      ]
    },
    "/api/v1/jobs/{id}/events": {
      "get": {
        "responses": {
          "200": {
            "content": {
              "text/event-stream": {
                "schema": {
                  "type": "string"
                }
              }
            },
            "description": "`data: JOB` lines."
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "405": {
            "$ref": "#/components/responses/Error"
          },
          "500": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "summary": "Server-Sent Events: the job's status when it changes, until it ends."
      },
      "parameters": [
        {
          "description": "The job id (`j-…`).",
          "in": "path",
          "name": "id",
          "required": true,
          "schema": {
            "type": "string"
          }
        }
      ]
    },
    "/api/v1/jobs/{id}/results": {
      "get": {
        "parameters": [
          {
            "description": "The last task of the previous page.",
            "in": "query",
            "name": "after",
            "schema": {
              "default": 0,
              "minimum": 0,
              "type": "integer"
            }
          },
          {
            "in": "query",
            "name": "limit",
            "schema": {
              "default": 1000,
              "maximum": 10000,
              "minimum": 1,
              "type": "integer"
            }
          },
          {
            "in": "query",
            "name": "status",
            "schema": {
              "enum": [
                "succeeded",
                "failed",
                "skipped",
                "cancelled"
              ],
              "type": "string"
            }
          }
        ],
        "responses": {
          "200": {
            "content": {
              "application/x-ndjson": {
                "schema": {
                  "type": "string"
                }
              }
            },
            "description": "One record a line (docs/JSON.md).",
            "headers": {
              "Link": {
                "description": "<…?after=T…>; rel=\"next\" when the page is full",
                "schema": {
                  "type": "string"
                }
              },
              "X-Next-After": {
                "schema": {
                  "type": "integer"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "405": {
            "$ref": "#/components/responses/Error"
          },
          "500": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "summary": "The job's task records in task order, as JSON lines."
      },
      "parameters": [
        {
          "description": "The job id (`j-…`).",
          "in": "path",
          "name": "id",
          "required": true,
          "schema": {
            "type": "string"
          }
        }
      ]
    },
    "/api/v1/jobs/{id}/retry-failed": {
      "parameters": [
        {
          "description": "The job id (`j-…`).",
          "in": "path",
          "name": "id",
          "required": true,
          "schema": {
            "type": "string"
          }
        }
      ],
      "post": {
        "responses": {
          "200": {
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Retried"
                }
              }
            },
            "description": "How many."
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "405": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "500": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "summary": "Queue the failed tasks of a finished job again."
      }
    },
    "/api/v1/openapi.json": {
      "get": {
        "responses": {
          "200": {
            "content": {
              "application/json": {
                "schema": {
                  "type": "object"
                }
              }
            },
            "description": "The OpenAPI document."
          }
        },
        "security": [],
        "summary": "This document."
      }
    }
  },
  "security": [
    {
      "bearer": []
    }
  ],
  "servers": [
    {
      "url": "http://127.0.0.1:8080"
    }
  ]
}
"""#
}
