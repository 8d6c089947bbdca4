"""The course's second default project, "Build GPT-2", on minbert's library (its
handout's map in this folder)."""
