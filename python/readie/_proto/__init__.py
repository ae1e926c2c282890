"""Message classes generated from proto/readie/v1 by tools/generate-proto.sh. Do not edit."""
