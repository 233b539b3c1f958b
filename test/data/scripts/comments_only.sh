#!/bin/bash
# A script that forgot to say anything.

# TODO: add the command
