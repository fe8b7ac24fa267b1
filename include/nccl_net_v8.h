/* placeholder: written by the plugin component */
