#!/bin/bash
# A script that forgot to say anything.

# (the command is still to be written)
