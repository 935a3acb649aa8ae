touch_file:
  caller.file.touch:
    - args:
      - name: /tmp/foo
