#!/usr/bin/env bash
echo "integration: not yet"
